"""Issue 26 item 1: a re-check answered from the check cache imports only what the answer needs: no
pydantic (the target schema), numpy, onnx, protobuf, PyYAML, checker or importlib.metadata (the versions in
the key are read from the dist-info folders' names); so it stays well under 0.5 s."""

import json
import subprocess
import sys

from conftest import ROOT, deploy
from test_check_cache import _tiny_onnx

from pipeline.check import cache as check_cache

HEAVY = ("pydantic", "numpy", "onnx", "google.protobuf", "yaml", "tensorflow", "tf2onnx", "onnxruntime",
         "pipeline.targets.device", "pipeline.check.checker", "pipeline.graph", "importlib.metadata")
# a hit in this process, then the heavy modules it left in sys.modules, as JSON on the last line
PROBE = """
import json, sys
from pipeline.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def test_a_cache_hit_imports_no_schema_numpy_onnx_or_checker(tmp_path):
    model = tmp_path / "yes.onnx"
    _tiny_onnx(model)
    env = {check_cache.DIR_ENV: str(tmp_path / "cache"), check_cache.OFF_ENV: "1", "DEPLOY_CHECK_CONVERT": "0"}
    first = deploy("check", model, "--target", "jetson_tx2", env=env)
    assert first.returncode == 0 and "check cache" not in first.stderr, first.stderr
    full_env = dict(__import__("os").environ, **env)
    hit = subprocess.run([sys.executable, "-c", PROBE, "check", str(model), "--target", "jetson_tx2"], cwd=str(ROOT),
                         env=full_env, capture_output=True, text=True, timeout=120)
    assert "the answer from the check cache" in hit.stderr, hit.stderr
    report, _, probe = hit.stdout.rstrip("\n").rpartition("\n")
    assert report + "\n" == first.stdout  # the same answer, word for word
    assert json.loads(probe) == {"code": 0, "heavy": []}


def test_the_versions_in_the_key_are_importlib_metadata_s():
    """The cache key's versions, read from the dist-info folders, are the ones importlib.metadata gives: the
    same key as before, so every stored answer is still found."""
    from importlib import metadata

    from pipeline import __version__

    expected = {"deploy": __version__}
    for name in check_cache._PACKAGES:
        try:
            expected[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected[name] = None
    assert check_cache._versions() == expected
    assert expected["onnx"] and expected["tf2onnx"]  # installed here: the comparison is not of Nones
