#!/usr/bin/env python3
"""Computes the condition hash of testdata/hash/*.yaml the way the original system did.

A development tool, not run by CI. It re-implements the original's manifest model
(pydantic v2, extra keys forbidden, PyYAML safe_load) from the schema description
in troupe's reference notes, and writes for each manifest:

    <name>.canonical.json   the exact bytes that are hashed
    <name>.sha256           their SHA-256

TestGoldenHashes compares manifest.Parse against these files. Regenerate after
adding a case (needs PyYAML 6 and pydantic 2):

    python3 manifest/testdata/orchestra_hash.py
"""
import hashlib
import json
import pathlib
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArtifactRef(_Model):
    path: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class GenerationConfig(_Model):
    max_output_tokens: Optional[int] = Field(default=None, gt=0)
    context_window_tokens: Optional[int] = Field(default=None, gt=0)
    compact_at_percent: Optional[int] = Field(default=None, ge=1, le=100)
    compact_at_tokens: Optional[int] = Field(default=None, gt=0)
    thinking_effort: Optional[Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]] = None
    extra: dict[str, Any] = Field(default_factory=dict)


class AgentBudget(_Model):
    max_calls: Optional[int] = Field(default=None, gt=0)
    max_input_tokens: Optional[int] = Field(default=None, gt=0)
    max_output_tokens: Optional[int] = Field(default=None, gt=0)
    max_cost_usd: Optional[float] = Field(default=None, gt=0)


class AgentClass(_Model):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    kind: Literal["orchestrator", "worker"]
    role: str = Field(min_length=1)
    count: int = Field(gt=0)
    endpoint: str
    model_revision: str
    harness: Literal["buzz-agent", "goose", "codex"] = "buzz-agent"
    prompt: ArtifactRef
    persona: Optional[ArtifactRef] = None
    skills: list[ArtifactRef] = Field(default_factory=list)
    include_platform_prompt: bool = True
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    budget: AgentBudget = Field(default_factory=AgentBudget)
    concurrency: int = Field(default=1, gt=0)


class Price(_Model):
    input_per_million_usd: float = Field(ge=0)
    cached_input_per_million_usd: float = Field(ge=0)
    output_per_million_usd: float = Field(ge=0)
    cache_read_rate: float = Field(default=0.0, ge=0, le=1)


class TrialBudget(_Model):
    timeout_seconds: int = Field(gt=0)
    max_cost_usd: Optional[float] = Field(default=None, gt=0)


class EnvironmentOverrides(_Model):
    override_cpus: Optional[int] = Field(default=None, gt=0)
    override_memory_mb: Optional[int] = Field(default=None, gt=0)
    override_storage_mb: Optional[int] = Field(default=None, gt=0)


class ExperimentManifest(_Model):
    schema_version: Literal["1"] = "1"
    condition: str = Field(min_length=1)
    roster: list[AgentClass] = Field(min_length=1)
    prices: dict[str, Price]
    trial_budget: TrialBudget
    environment: EnvironmentOverrides = Field(default_factory=EnvironmentOverrides)
    metadata: dict[str, Any] = Field(default_factory=dict)


def canonical(m: ExperimentManifest) -> bytes:
    data = m.model_dump(mode="json")
    for entry in data["roster"]:
        if entry["harness"] == "buzz-agent":
            del entry["harness"]
        if entry["generation"]["thinking_effort"] is None:
            del entry["generation"]["thinking_effort"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


here = pathlib.Path(__file__).parent / "hash"
for path in sorted(here.glob("*.yaml")):
    manifest = ExperimentManifest.model_validate(yaml.safe_load(path.read_bytes()))
    body = canonical(manifest)
    path.with_suffix(".canonical.json").write_bytes(body)
    digest = hashlib.sha256(body).hexdigest()
    path.with_suffix(".sha256").write_text(digest + "\n")
    print(digest, path.name)
