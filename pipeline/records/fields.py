"""The kinds of value a record's key may hold (a string, a batch size, a latency in milliseconds, ...),
each with its range, and ``Record``, the base of every object in a record: pipeline.records.models and
pipeline.records.parts build the files' schemas from them."""

import math
from typing import Any, Dict, List

from pydantic import BaseModel, ConfigDict, PlainValidator
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

# ------------------------------------------------------------------------------------------------ values
# Scalar keys are checked by ``_kind`` validators whose message is what a reader expects ("a number of
# milliseconds from 1e-09 to 1e+09"); pipeline.records turns the first error into one line naming the key.

ERROR = "deploy_record"  # the error type of every check below (pipeline.records reads its message as "expected")


# The bounds (docs/reliability.md lists them per key): what a real run can write, with room to spare, and
# small enough that the readers' arithmetic stays finite (a ratio of two latencies, a batch over a p50, an
# interval from an iteration count): a denormal latency made the gate's relative change infinite.
MAX_FLOAT_INT = 2 ** 1023  # a whole number beyond this cannot become a float
MAX_WHOLE = 2 ** 53  # counts, sizes in bytes, exit codes: what a float (and every JSON reader) holds exactly
MAX_BATCH = 65536  # a batch size (the config allows 1,024 for the benchmark, 4,096 for training)
MAX_ITERATIONS = 10 ** 9  # timed calls of one batch size
MIN_MS, MAX_MS = 1e-9, 1e9  # one call: a picosecond to 11.6 days, in milliseconds
MAX_SECONDS = 1e9  # a stage's or a build's duration (31 years)
MIN_RATE, MAX_RATE = 1e-9, 1e15  # images per second
MAX_MW, MAX_MJ = 1e9, 1e12  # power (milliwatts) and energy (millijoules)
MAX_K = 1e6  # the gate's k (how many spreads a change must clear)


def _kind(expected, ok):
    def validate(value):
        if not ok(value):
            raise PydanticCustomError(ERROR, expected.replace("{", "{{").replace("}", "}}"))
        return value

    return PlainValidator(validate)


def _num(v):
    """A JSON number a reader can compute with: not a boolean, and a whole number that fits a float
    (10**400 parses, but turning it into a float for an interval is an OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return not isinstance(v, int) or -MAX_FLOAT_INT < v < MAX_FLOAT_INT


def _finite(v):
    return _num(v) and math.isfinite(v)


def _whole(v, most=MAX_WHOLE):
    return isinstance(v, int) and not isinstance(v, bool) and -most <= v <= most


def _within(low, high):
    """A finite number from ``low`` to ``high`` (0 itself allowed when ``low`` is 0)."""
    return lambda v: _finite(v) and low <= v <= high


def _zero_or(low, high):
    """0, or a finite number from ``low`` to ``high``: a spread or a minimum may be 0, never a denormal."""
    return lambda v: _finite(v) and (v == 0 or low <= v <= high)


def _percentiles(v):
    ok = _zero_or(MIN_MS, MAX_MS)
    return (isinstance(v, list) and len(v) == 101 and all(ok(x) for x in v)
            and all(b >= a for a, b in zip(v, v[1:])))


Str = Annotated[str, _kind("a string", lambda v: isinstance(v, str))]
Bool = Annotated[bool, _kind("true or false (a JSON boolean)", lambda v: isinstance(v, bool))]
Whole = Annotated[int, _kind("a whole number from -2**53 to 2**53", _whole)]
Count = Annotated[int, _kind("a whole number from 0 to 2**53", lambda v: _whole(v) and v >= 0)]
PositiveInt = Annotated[int, _kind("a whole number from 1 to 2**53", lambda v: _whole(v) and v >= 1)]
BatchSize = Annotated[int, _kind("a whole number from 1 to {}".format(MAX_BATCH), lambda v: _whole(v, MAX_BATCH) and v >= 1)]
Iterations = Annotated[int, _kind("a whole number from 1 to 10**9", lambda v: _whole(v, MAX_ITERATIONS) and v >= 1)]
Number = Annotated[float, _kind("a number", _num)]  # NaN and infinity allowed (a training loss may diverge)
Finite = Annotated[float, _kind("a finite number", _finite)]
Positive = Annotated[float, _kind("a finite number > 0", lambda v: _finite(v) and v > 0)]
NonNegative = Annotated[float, _kind("a finite number >= 0", lambda v: _finite(v) and v >= 0)]
Ms = Annotated[float, _kind("a number of milliseconds from 1e-09 to 1e+09", _within(MIN_MS, MAX_MS))]
Ms0 = Annotated[float, _kind("0 or a number of milliseconds from 1e-09 to 1e+09", _zero_or(MIN_MS, MAX_MS))]
Seconds0 = Annotated[float, _kind("a number of seconds from 0 to 1e+09", _within(0, MAX_SECONDS))]
Rate = Annotated[float, _kind("a number of images per second from 1e-09 to 1e+15", _within(MIN_RATE, MAX_RATE))]
Milliwatts = Annotated[float, _kind("a number of milliwatts from 0 to 1e+09", _within(0, MAX_MW))]
Millijoules = Annotated[float, _kind("a number of millijoules from 0 to 1e+12", _within(0, MAX_MJ))]
K = Annotated[float, _kind("a number > 0 and at most 1e+06", lambda v: _finite(v) and 0 < v <= MAX_K)]
Fraction = Annotated[float, _kind("a number from 0 to 1", lambda v: _finite(v) and 0 <= v <= 1)]
Percentiles = Annotated[List[float], _kind("101 ascending numbers of milliseconds, each 0 or from 1e-09 to 1e+09 "
                                           "(the 0th..100th percentiles)", _percentiles)]
Figure = Annotated[Any, _kind("a finite number, true or false", lambda v: isinstance(v, bool) or _finite(v))]
Pair = Annotated[List[Any], _kind("a list of two finite numbers (null for an open end)", lambda v: isinstance(v, list)
                                  and len(v) == 2 and all(x is None or _finite(x) for x in v))]
_RUN_KEYS = ("dir", "name", "run", "path", "when", "finished")
RunRef = Annotated[Any, _kind("a run folder's name, or an object whose dir, name, run, path, when and finished are "
                              "strings", lambda v: isinstance(v, str) or (isinstance(v, dict) and all(
                                  v.get(k) is None or isinstance(v.get(k), str) for k in _RUN_KEYS)))]
Obj = Dict[str, Any]


class Record(BaseModel):
    """A file's top level or one of its objects: the keys below are checked, any other key is kept."""

    model_config = ConfigDict(extra="allow")
