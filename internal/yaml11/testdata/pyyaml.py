#!/usr/bin/env python3
"""Writes the expected values of testdata/pyyaml/*.yaml as PyYAML's safe_load sees them.

A development tool, not run by CI: the .want.json files it writes are committed, and
TestMatchesPyYAML compares yaml11.Parse against them. Regenerate after adding a case:

    python3 internal/yaml11/testdata/pyyaml.py      (needs PyYAML 6)

Values are tagged so that types are compared, not just JSON text: {"int": "31"},
{"float": "<float.hex()>"}, {"str": ...}, {"bool": ...}, {"null": null},
{"timestamp": "..."}, {"seq": [...]}, {"map": [[key, value], ...]} in dict order.
"""
import datetime
import json
import math
import pathlib
import yaml

def tag(v):
    if v is None:
        return {"null": None}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        if math.isnan(v):
            return {"float": "nan"}
        if math.isinf(v):
            return {"float": "inf" if v > 0 else "-inf"}
        return {"float": v.hex()}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, (datetime.date, datetime.datetime)):
        return {"timestamp": True}
    if isinstance(v, list):
        return {"seq": [tag(x) for x in v]}
    if isinstance(v, dict):
        return {"map": [[tag(k), tag(x)] for k, x in v.items()]}
    raise TypeError(type(v))

here = pathlib.Path(__file__).parent / "pyyaml"
for path in sorted(here.glob("*.yaml")):
    try:
        want = {"value": tag(yaml.safe_load(path.read_bytes()))}
    except yaml.YAMLError as e:
        want = {"error": str(e).splitlines()[0]}
    except ValueError as e:
        want = {"error": str(e)}
    except RecursionError:
        want = {"recursive": True}
    path.with_suffix(".want.json").write_text(json.dumps(want, indent=1, ensure_ascii=False) + "\n")
    print(path.name, "error" if "error" in want else "ok")
