"""The deployment config: one YAML file, loaded with PyYAML's safe loader into one validated schema.

The schema (pydantic) owns every default. Errors name the file, the line where possible, the key
path and what is allowed::

    configs/x.yaml:14 stages.engine.precision: 'fp8' is not one of 'fp32', 'fp16', 'int8'

``extends: base.yaml`` merges a base config under this one (mappings merge key by key, anything
else is replaced); ``--set stages.train.epochs=1`` overrides a key from the command line.

    schema.py    the sections and their keys (pydantic models): every default lives here
    source.py    reading YAML with bounds, line numbers and ``extends`` chains
    loading.py   load_config(path, overrides): merge, validate, one line per problem; validate_config:
                 every problem at once (schema, target, paths) for deploy validate
    docs.py      docs/config.md, generated from the schema (python -m pipeline.config.docs)
"""

from pipeline.config.loading import ConfigError, load_config, parse_override, validate_config  # noqa: F401
from pipeline.config.target_fit import target_problems  # noqa: F401
from pipeline.config.schema import Config, ZOO, json_schema  # noqa: F401
