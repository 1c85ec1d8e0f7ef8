"""The runner's cache: a stage's key, and whether its manifest in the run folder is still good.

A stage is a cache hit when its manifest records the same key (``cache_key``): a hash of the
stage's name and version, its config section, the config sections it uses, the dataset's
fingerprint if it reads the dataset, its inputs' hashes and the versions of the tools it declares.
"""

import hashlib
import json
from pathlib import Path

from pipeline import files
from pipeline.stages.tools import tool_versions

MANIFEST = "manifest.json"


def read_manifest(stage_dir):
    """The stage's manifest (schema deploy.manifest/1, pipeline.records), or None when it is missing, does
    not parse, has the wrong shape or comes from a newer deploy: the stage is then simply not cached."""
    from pipeline import records
    from pipeline.errors import DeployError

    try:
        return records.read(Path(stage_dir) / MANIFEST, "manifest")
    except DeployError:
        return None


def cache_hit(stage, stage_dir, key, progress=None, field="key"):
    """The manifest of an up-to-date result whose outputs still hold what was written, else None.

    Each output's content is checked against the sha256 the manifest recorded; when its size,
    mtime and inode are what the manifest recorded too, the hash is trusted without reading the
    bytes (DVC's fast path). A malformed manifest is "not cached"."""
    manifest = read_manifest(stage_dir)
    try:
        if not manifest or manifest.get("status") != "ok" or manifest.get(field) != key:
            return None
        outputs = manifest["outputs"]
        if set(outputs) != set(stage.outputs):
            return None
        for name, entry in outputs.items():
            path = stage_dir / entry["path"]
            if not path.exists() or Path(stage_dir).resolve() not in path.resolve().parents:  # inside the stage folder
                return None
            if entry.get("stat") and files.stat_signature(path) == entry["stat"]:
                continue
            if files.sha256_path(path) != entry["sha256"]:
                if progress is not None:
                    progress.log("{:<9} {} changed since it was written (sha256 differs): running {} again".format(
                        stage.name, entry["path"], stage.name))
                    progress.event("stage", stage=stage.name, status="changed", message=entry["path"])
                return None
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
    return manifest


def made_elsewhere(stage, stage_dir, key_data, progress):
    """A stage before --from/--only whose config, inputs and dataset match but whose tools differ
    (made on another machine, or before an upgrade): its manifest, with a note naming the tools."""
    manifest = cache_hit(stage, stage_dir, inputs_key(key_data), progress, field="inputs_key")
    if manifest is None:
        return None
    here, there = key_data["tools"], manifest.get("stage_tools") or {}
    differ = ["{} {} (here {})".format(t, there.get(t, "?"), here.get(t, "not installed"))
              for t in sorted(set(here) | set(stage.tools)) if there.get(t) != here.get(t)]
    if differ:
        progress.log("{:<9} made with {}; taken as it is (--from/--only start later)".format(stage.name, ", ".join(differ)))
    return manifest


def cache_key(the_plan, step, input_hashes):
    """(key, what it hashes): the stage's name and version, its config section, the sections it
    uses, the dataset's fingerprint if it reads the dataset, its inputs' hashes and the versions of
    the tools it declares (so upgrading tf2onnx redoes convert, and nothing before it)."""
    stage, config = step.stage, the_plan.config
    key_data = {
        "stage": step.name,
        "version": stage.version,
        "options": step.options.model_dump(mode="json"),
        "uses": {u: section(config, the_plan.target, u) for u in stage.uses},
        "dataset": the_plan.dataset_fingerprint if "dataset" in stage.uses else None,
        "inputs": input_hashes,
        "tools": tool_versions(stage.tools),
    }
    return hashlib.sha256(json.dumps(key_data, sort_keys=True).encode()).hexdigest(), key_data


def inputs_key(key_data):
    """The cache key without the tool versions: the same config, inputs and dataset. A stage before
    --from/--only that was made by other tool versions (on another machine: a CI host job that has
    TensorFlow, before a Jetson job that has not) is taken as it is when this key matches."""
    loose = {k: v for k, v in key_data.items() if k != "tools"}
    return hashlib.sha256(json.dumps(loose, sort_keys=True).encode()).hexdigest()


def section(config, target, name):
    """The config value a stage uses: a top-level section ("device") or a dotted key ("stages.convert.format")."""
    if name == "target":
        return target.model_dump(mode="json") if hasattr(target, "model_dump") else str(target)
    value = config
    for part in name.split("."):
        value = getattr(value, part, None) if value is not None else None
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value
