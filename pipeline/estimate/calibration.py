"""The calibrated parameters per board: shipped (fitted on published figures) or the user's own.

    params, basis = board_params("jetson_tx2")   # Params, "fitted on 7 published ... (docs/estimate.md)"

The shipped fit is ``targets/estimate/calibration.json`` (written by scripts/bench/estimate_calibrate.py):
per board the parameters fitted to the published TensorRT latencies of its GPU architecture's boards
(``basis`` says which), and ``default``, the fit over every board's figures, for a board in no group (its efficiencies are fractions of
each board's own data-sheet peaks). ``deploy estimate --calibrate RUN...`` writes the user's refit to
``$DEPLOY_ESTIMATE_DIR/<target>.json`` (default ``~/.config/deploy/estimate/``); a user file, when there
is one, is used instead and the estimate says so. Nothing here writes into targets/.
"""

import json
import os
from pathlib import Path

from pipeline.errors import DeployError
from pipeline.estimate.roofline import Params
from pipeline.targets.files import targets_dir

USER_DIR_ENV = "DEPLOY_ESTIMATE_DIR"
SHIPPED = Path("estimate") / "calibration.json"
_KEYS = ("eff_conv", "eff_other", "eff_mem", "launch_us", "spread")


def user_dir():
    override = os.environ.get(USER_DIR_ENV)
    return Path(override).expanduser() if override else Path.home() / ".config" / "deploy" / "estimate"


def user_file(target_name):
    return user_dir() / "{}.json".format(target_name)


def shipped_file():
    return targets_dir() / SHIPPED


def _params(entry, where):
    try:
        values = {k: float(entry[k]) for k in _KEYS}
    except (KeyError, TypeError, ValueError):
        raise DeployError("{}: a calibration needs numbers {}; run scripts/bench/estimate_calibrate.py (shipped) or "
                          "deploy estimate --calibrate again (yours)".format(where, ", ".join(_KEYS)))
    if not all(0 < values[k] <= 1.0 for k in ("eff_conv", "eff_other", "eff_mem")) or values["launch_us"] < 0 \
            or not 0 <= values["spread"] < 5:
        raise DeployError("{}: calibration values out of range (efficiencies in (0, 1], launch_us >= 0)".format(where))
    return Params(overhead_ms=float(entry.get("overhead_ms") or 0.0), k_half=float(entry.get("k_half") or 0.0),
                  **values)


def _load(path):
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DeployError("{}: cannot read the estimate calibration ({}); delete it or calibrate again".format(path, e))
    if not isinstance(data, dict):
        raise DeployError("{}: not an estimate calibration (expected a JSON object)".format(path))
    return data


def shipped():
    path = shipped_file()
    if not path.exists():
        raise DeployError("{}: no shipped estimate calibration; run scripts/bench/estimate_calibrate.py".format(path))
    return _load(path)


def board_params(target_name):
    """(Params, basis): the user's calibration for the board, else the shipped fit for it, else the default."""
    mine = user_file(target_name)
    if mine.exists():
        data = _load(mine)
        runs = data.get("runs") or []
        return _params(data, mine), "your calibration {} ({} measured run(s))".format(mine, len(runs))
    data = shipped()
    boards = data.get("boards") or {}
    where = shipped_file()
    if target_name in boards:
        entry = boards[target_name]
        basis = entry.get("basis") or "fitted on {} published TensorRT latencies of this board".format(
            entry.get("points", "?"))
        return _params(entry, where), "{} ({})".format(basis, entry.get("source", "docs/estimate.md"))
    if "default" not in data:
        raise DeployError("{}: no calibration for {} and no default".format(where, target_name))
    entry = data["default"]
    return _params(entry, where), ("no published figures for this board: the efficiencies fitted on {} ({} "
                                   "points), applied to this board's data-sheet peaks".format(
                                       entry.get("fitted_on", "other boards"), entry.get("points", "?")))


def write_user(target_name, params, runs):
    """The user's calibration of a board, to the user file (never targets/); returns its path."""
    from pipeline.files import write_json

    path = user_file(target_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    shipped_dir = targets_dir().resolve()
    if shipped_dir == path.parent.resolve() or shipped_dir in path.resolve().parents:
        raise DeployError("{}: the calibration is the user's and is never written into the shipped targets; set {} "
                          "to another folder".format(path, USER_DIR_ENV))
    data = dict(params.to_dict())
    data["target"] = target_name
    data["runs"] = runs
    write_json(path, data)
    return path
