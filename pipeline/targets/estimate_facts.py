"""The ``estimate:`` block of a target file: the GPU facts `deploy estimate` needs (pipeline.estimate).

    estimate:
      power_mode: MAXN
      gpu: 256-core Pascal at 1300 MHz
      peak_tflops: {fp32: 0.67, fp16: 1.33}          # CUDA cores
      tensor_tflops: {fp16: null, int8: null}         # dense, tensor cores; null: none
      memory_bandwidth_gbs: 59.7
      sources: {peak_tflops: ['...'], memory_bandwidth_gbs: ['...']}

Every fact names its public source under ``sources``. The DLA is not part of the number.
"""

from typing import Dict, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

ESTIMATE_PRECISIONS = ("fp32", "fp16", "int8")


class Peaks(BaseModel):
    """Peak arithmetic in TFLOPS (TOPS for int8) per precision; None: the GPU has no fast path for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fp32: Optional[float] = Field(default=None, gt=0)
    fp16: Optional[float] = Field(default=None, gt=0)
    int8: Optional[float] = Field(default=None, gt=0)


class EstimateFacts(BaseModel):
    """What the latency estimate assumes of the board's GPU (data sheet figures, at ``power_mode``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    power_mode: str  # the nvpmodel mode the peaks hold at, e.g. MAXN
    gpu: str  # cores, architecture and the clock the peaks are computed at
    peak_tflops: Peaks  # CUDA cores
    tensor_tflops: Peaks = Peaks()  # tensor cores (dense); all None on TX2 and Nano
    memory_bandwidth_gbs: float = Field(gt=0)
    notes: Tuple[str, ...] = ()
    sources: Dict[str, Tuple[str, ...]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sourced(self):
        if self.peak_tflops.fp32 is None:
            raise ValueError("estimate.peak_tflops.fp32 is missing: every GPU has an fp32 peak")
        for fact in ("peak_tflops", "memory_bandwidth_gbs"):
            if not self.sources.get(fact):
                raise ValueError(f"estimate.sources has no source for {fact}; cite the data sheet")
        if any(getattr(self.tensor_tflops, p) for p in ESTIMATE_PRECISIONS) and not self.sources.get("tensor_tflops"):
            raise ValueError("estimate.sources has no source for tensor_tflops; cite the data sheet")
        return self
