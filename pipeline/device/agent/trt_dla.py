"""DLA in the agent's TensorRT build: the builder settings for a DLA core (fp16/int8 only, static shapes,
GPU fallback, DETAILED profiling so the inspector can name layers) and, after the build, where the
layers really run -- the engine inspector (TensorRT >= 8.2), else the build log's summary, else unknown --
for engine.json's ``dla``: {core, layers_on_dla, layers_on_gpu, io_layers, runs_on, source}. trtexec builds
get the same from their --exportLayerInfo file or log (``placement_from_file``).
"""

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from . import EngineError

if TYPE_CHECKING:  # mypy reads tensorrt-stubs; at run time tensorrt is imported inside the functions
    import tensorrt as trt  # noqa: F401


def setup_dla(builder, config, network, dla_core, precision, profile):
    # type: (trt.Builder, trt.IBuilderConfig, trt.INetworkDefinition, Optional[int], str, Dict[str, Dict[str, List[int]]]) -> List[str]
    """Build for DLA core ``dla_core`` with GPU fallback; the layers the builder says cannot run on DLA
    (before the build: where they really ran is read after it, ``dla_placement``). DLA runs fp16 and int8
    only, and has no dynamic shapes (NVIDIA, "DLA Supported Layers and Restrictions"): both are refused
    here, as the config check refuses them on the host."""
    import tensorrt as trt

    if dla_core is None:
        return []
    if precision not in ("fp16", "int8"):
        raise EngineError("DLA runs fp16 and int8 only: set stages.engine.precision: fp16 (or int8) to build for "
                          "dla_core {}".format(dla_core))
    for name, shapes in sorted(profile.items()):
        if not shapes["min"] == shapes["opt"] == shapes["max"]:
            raise EngineError("DLA needs static shapes, but the profile of {!r} is {} .. {}: one batch size per DLA "
                              "engine (stages.benchmark.batch_sizes)".format(name, shapes["min"], shapes["max"]))
    if builder.num_DLA_cores <= dla_core:
        raise EngineError("stages.engine.dla_core {}: this board has {} DLA cores".format(dla_core, builder.num_DLA_cores))
    config.default_device_type = trt.DeviceType.DLA
    config.DLA_core = int(dla_core)
    config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    verbosity = getattr(trt, "ProfilingVerbosity", None)  # DETAILED from 8.2: the engine inspector then names each layer
    if verbosity is not None and hasattr(verbosity, "DETAILED"):
        config.profiling_verbosity = verbosity.DETAILED
    fallback = []  # type: List[str]
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if not config.can_run_on_DLA(layer):
            fallback.append(layer.name)
    return fallback


IO_WORDS = (" to nvm", " from nvm", "copy finish", "reformat")  # a DLA engine's I/O and reformat layers


def _layer_words(layer):
    # type: (Any) -> str
    if not isinstance(layer, dict):
        return str(layer)
    return " ".join(str(layer.get(key, "")) for key in ("LayerType", "Name", "TacticName", "Origin"))


def on_dla_layer(layer):
    # type: (Any) -> bool
    """Whether an engine inspector layer (JSON, DETAILED verbosity) runs on the DLA: TensorRT puts a DLA
    subgraph into one layer of type ForeignNode ("{ForeignNode[...]}"), or names DLA in its type or tactic.
    The copies in and out of the DLA's memory ("<tensor> to nvm", "<tensor> from nvm", "... copy finish") are
    not DLA layers: ``io_layer``."""
    words = _layer_words(layer)
    return not io_layer(layer) and ("ForeignNode" in words or "DLA" in words.upper())


def io_layer(layer):
    # type: (Any) -> bool
    """A DLA engine's I/O or reformat layer (NVIDIA/TensorRT#3143 lists ``images to nvm``, ``head_3 from nvm``,
    ``... copy finish``; Reformat layers convert layouts): counted apart from the GPU's layers."""
    words = _layer_words(layer).lower()
    return any(word in words for word in IO_WORDS)


def placement(dla_core, on_dla, on_gpu, source, io=0):
    # type: (int, Optional[int], Optional[int], str, Optional[int]) -> Dict[str, Any]
    """engine.json's "dla": ``layers_on_gpu`` counts compute layers only, ``io_layers`` the copies to and
    from DLA memory and reformats; "dla" when nothing but those runs beside the DLA's layers."""
    if on_dla is None or on_gpu is None:
        runs_on = "unknown"
        io = None
    elif on_dla == 0:
        runs_on = "gpu"
    else:
        runs_on = "mixed" if on_gpu else "dla"
    return {"core": int(dla_core), "layers_on_dla": on_dla, "layers_on_gpu": on_gpu, "io_layers": io,
            "runs_on": runs_on, "source": source}


def placement_from_layers(dla_core, layers, source):
    # type: (int, List[Any], str) -> Optional[Dict[str, Any]]
    """The inspector's "Layers" (TensorRT's engine inspector, or trtexec's --exportLayerInfo file) counted."""
    if not layers or not all(isinstance(layer, dict) for layer in layers):
        return None
    on_dla = sum(1 for layer in layers if on_dla_layer(layer))
    io = sum(1 for layer in layers if io_layer(layer))
    return placement(dla_core, on_dla, len(layers) - on_dla - io, source, io)


_PREFIX = re.compile(r"^\s*(?:\[(?!DlaLayer\]|GpuLayer\])[^\]]*\]\s*)+")  # [date] [I] [TRT], never [DlaLayer]


def placement_from_log(dla_core, lines):
    # type: (int, List[str]) -> Optional[Dict[str, Any]]
    """The build log's summary, in both of TensorRT's formats, also inside trtexec's output
    ("[11/28/2026-01:02:03] [I] [TRT] ..."):
    8.x:  "---------- Layers Running on DLA ----------" then one "[DlaLayer] ..." line per DLA subgraph, the
          same for "GPU" and "[GpuLayer] ...";
    7.x, 10.x: "--------------- Layers running on DLA:" then the layers comma-separated on one line
          (NVIDIA/TensorRT samples/sampleCudla/README.md at v10.16 and v11.1)."""
    counts = {}  # type: Dict[str, int]
    io = 0
    section = None  # type: Optional[str]
    for line in lines:
        text = _PREFIX.sub("", line).strip()
        lowered = text.lower()
        if "layers running on dla" in lowered:
            section = "dla"
            counts.setdefault(section, 0)
        elif "layers running on gpu" in lowered:
            section = "gpu"
            counts.setdefault(section, 0)
        elif section is not None and ("[DlaLayer]" in text or "[GpuLayer]" in text):
            for entry in re.split(r"\[(?:DlaLayer|GpuLayer)\]", text)[1:]:
                if section == "gpu" and io_layer(entry):
                    io += 1
                else:
                    counts[section] += 1
        elif section is not None and text:
            section = None
    if not counts:
        return None
    return placement(dla_core, counts.get("dla", 0), counts.get("gpu", 0), "build_log", io)


def placement_from_file(dla_core, layer_info_path, log_lines):
    # type: (int, Optional[str], List[str]) -> Dict[str, Any]
    """A trtexec DLA build's placement: its --exportLayerInfo file (the engine inspector's JSON, written with
    --profilingVerbosity=detailed), else its log's summary, else unknown."""
    import json

    if layer_info_path:
        try:
            with open(layer_info_path) as f:
                info = json.load(f)
            found = placement_from_layers(dla_core, info.get("Layers") or [] if isinstance(info, dict) else [],
                                          "engine_inspector")
            if found is not None:
                return found
        except (IOError, OSError, ValueError):
            pass
    found = placement_from_log(dla_core, log_lines)
    return found if found is not None else placement(dla_core, None, None, "unavailable")


def dla_placement(data, dla_core, logger, lines, v):
    # type: (bytes, int, trt.ILogger, List[str], Tuple[int, int]) -> Dict[str, Any]
    """Where the layers of a DLA build really run: the engine inspector (TensorRT >= 8.2), else the build
    log's summary, else unknown -- for engine.json's "dla" key (never "runs on DLA" on a guess)."""
    import json

    import tensorrt as trt

    if v >= (8, 2):
        try:
            runtime = trt.Runtime(logger)
            runtime.DLA_core = int(dla_core)
            engine = runtime.deserialize_cuda_engine(data)
            inspector = engine.create_engine_inspector() if engine is not None else None
            info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON)) if inspector else {}
            found = placement_from_layers(dla_core, info.get("Layers") or [], "engine_inspector")
            if found is not None:
                return found
        except Exception as e:  # the inspector is a diagnostic: fall back to the log, say why
            lines.append("[W] engine inspector failed ({}: {}); reading the build log".format(type(e).__name__, e))
    found = placement_from_log(dla_core, lines)
    return found if found is not None else placement(dla_core, None, None, "unavailable")
