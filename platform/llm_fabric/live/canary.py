"""`fabric canary`: does every replica answer the recipe's canary prompts, and alike?

Each replica of the plan that an endpoint is given for gets the recipe's canary prompts
(`Recipe.canary`) directly, not through the gateway, with greedy decoding (temperature 0, one
seed). Each answer is judged three ways:

- its cheap signals: it came back within the deadline with at least `min_tokens` tokens, in the
  prompt's script, and (a `tool_call` prompt) as a tool call whose arguments parse;
- against the deployment's recorded reference (`canary/DEPLOYMENT.yaml` in the site repo, written by
  `fabric canary --record` and merged like any change), when it was recorded for the configuration
  fingerprint the plan gives the replica; a reference of another configuration is not compared;
- against the other replicas of its deployment: greedy decoding of one configuration gives one
  answer, so a replica outside the majority answer disagrees (with two replicas and no reference, a
  disagreement fails both: nothing says which one is right).

A replica passes when every prompt passes all three. The findings are a Prometheus exposition
(`exposition`) labelled per lanes' contract: site, deployment, replica (the index), node.
"""

from __future__ import annotations

import json
import time
import unicodedata
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from pydantic import Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.documents import load_model
from llm_fabric.engine.recipes import CanaryPrompt, get_recipe
from llm_fabric.errors import UsageError
from llm_fabric.live.drift import REACHABLE, check_replica
from llm_fabric.names import (
    CANARY_LATENCY_METRIC,
    CANARY_PASS_METRIC,
    CANARY_REFERENCE_METRIC,
    CANARY_SIBLINGS_METRIC,
    CANARY_TOKENS_METRIC,
)
from llm_fabric.plan.document import Plan, ReplicaPlacement

CANARY_DIR = "canary"  # the site repo's folder of recorded references
SEED = 0
# the tool a `tool_call` prompt offers: the answer must call it with arguments that parse
CANARY_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

State = Literal["pass", "fail", "unknown"]


class ReferenceAnswer(FabricModel):
    text: str = Field(description="the whole greedy answer (reasoning and content)")
    completion_tokens: int = Field(ge=0)


class CanaryReference(FabricModel):
    """A deployment's reference answers: `canary/DEPLOYMENT.yaml` in the site repo, a reviewed change."""

    version: Literal[1] = 1
    deployment: str
    recipe: str
    fingerprint: str | None = Field(None, description="configuration fingerprint (sha256) the answers belong to")
    recorded_from: str = Field(description="the replica (DEPLOYMENT/INDEX) they were recorded from")
    answers: dict[str, ReferenceAnswer] = Field(description="prompt name -> answer")


@dataclass(frozen=True)
class Answer:
    prompt: str
    text: str | None  # None: no answer (the error says why)
    completion_tokens: int = 0
    latency_s: float = 0.0
    script: str | None = None
    tool_call_parses: bool | None = None
    error: str | None = None


@dataclass
class ReplicaVerdict:
    deployment: str
    index: int
    site: str
    node: str
    url: str
    answers: list[Answer]
    failures: list[str] = field(default_factory=list)  # "PROMPT: why", in prompt order
    siblings_agree: bool = True
    siblings: int = 0  # other replicas of the deployment asked in the same run
    reference_agrees: bool | None = None  # None: no reference applies
    # the reference was recorded for this replica's own configuration fingerprint (not one without a fingerprint)
    reference_matches: bool = False

    @property
    def name(self) -> str:
        return f"{self.deployment}/{self.index}"

    @property
    def state(self) -> State:
        return "fail" if self.failures else "pass"

    def as_dict(self) -> dict[str, object]:
        return {
            "replica": self.name,
            "deployment": self.deployment,
            "index": self.index,
            "site": self.site,
            "node": self.node,
            "url": self.url,
            "state": self.state,
            "failures": self.failures,
            "siblings_agree": self.siblings_agree,
            "siblings": self.siblings,
            "reference_agrees": self.reference_agrees,
            "answers": [
                {
                    "prompt": a.prompt,
                    "text": a.text,
                    "completion_tokens": a.completion_tokens,
                    "latency_s": round(a.latency_s, 3),
                    "script": a.script,
                    "tool_call_parses": a.tool_call_parses,
                    "error": a.error,
                }
                for a in self.answers
            ],
        }


@dataclass
class CanaryRun:
    replicas: list[ReplicaVerdict]
    unchecked: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def failing(self) -> list[ReplicaVerdict]:
        return [r for r in self.replicas if r.failures]

    def as_dict(self) -> dict[str, object]:
        return {
            "failing": [r.name for r in self.failing],
            "replicas": [r.as_dict() for r in self.replicas],
            "unchecked": self.unchecked,
            "notes": self.notes,
        }


# the first word of a letter's Unicode name, for the scripts `CanaryPrompt.script` names so
_SCRIPT_WORDS = {"latin", "cyrillic", "greek", "hangul", "arabic", "hebrew", "devanagari"}


def script_of(text: str) -> str | None:
    """The script most of the answer's letters are written in (None: no letters)."""
    scripts: Counter[str] = Counter()
    for char in text:
        if not char.isalpha():
            continue
        name = unicodedata.name(char, "")
        word = name.split(" ", 1)[0].lower()
        if name.startswith("CJK"):
            word = "han"
        elif name.startswith(("HIRAGANA", "KATAKANA")):
            word = "kana"
        scripts[word if word in _SCRIPT_WORDS | {"han", "kana"} else "other"] += 1
    return scripts.most_common(1)[0][0] if scripts else None


def _tool_call_parses(message: dict[str, object]) -> bool:
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return False
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            return False
        try:
            json.loads(str(function.get("arguments") or "{}"))
        except ValueError:
            return False
    return True


def _error_message(body: bytes, limit: int = 120) -> str:
    """The message of an OpenAI-style error body, shortened (the engine's words say what it refused)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip()[:limit]
    error = data.get("error") if isinstance(data, dict) else None
    message = (
        error.get("message") if isinstance(error, dict) else data.get("message") if isinstance(data, dict) else None
    )
    return str(message or "").strip()[:limit]


def ask(url: str, model: str, prompt: CanaryPrompt, timeout: float) -> Answer:
    """One greedy chat completion of `prompt` from the engine at `url` (its root or /v1)."""
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt.prompt}],
        "max_tokens": prompt.max_tokens,
        "temperature": 0,
        "seed": SEED,
    }
    if prompt.tool_call:
        body["tools"] = [CANARY_TOOL]
    request = urllib.request.Request(
        url.rstrip("/").removesuffix("/v1") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = _error_message(exc.read())
        error = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
        return Answer(prompt.name, None, latency_s=time.monotonic() - started, error=error)
    except (urllib.error.URLError, OSError, ValueError) as exc:  # a timeout is an OSError
        reason = getattr(exc, "reason", exc)
        return Answer(prompt.name, None, latency_s=time.monotonic() - started, error=f"no answer: {reason}")
    latency = time.monotonic() - started
    try:
        message = reply["choices"][0]["message"]
        tokens = int((reply.get("usage") or {}).get("completion_tokens") or 0)
    except (KeyError, IndexError, TypeError, ValueError):
        return Answer(prompt.name, None, latency_s=latency, error="not a chat completion")
    # a reasoning parser splits the answer: both halves are the answer greedy decoding gave
    text = str(message.get("reasoning_content") or message.get("reasoning") or "") + str(message.get("content") or "")
    parses = _tool_call_parses(message) if prompt.tool_call else None
    if parses:
        text += json.dumps(message.get("tool_calls"), sort_keys=True)
    return Answer(prompt.name, text, tokens, latency, script_of(text), parses)


def signal_failures(prompt: CanaryPrompt, answer: Answer) -> list[str]:
    if answer.text is None:
        return [answer.error or "no answer"]
    out = []
    if answer.completion_tokens < prompt.min_tokens:
        out.append(f"{answer.completion_tokens} token(s), fewer than {prompt.min_tokens}")
    if prompt.script is not None and answer.script != prompt.script:
        out.append(f"answer in script {answer.script or 'none'}, not {prompt.script}")
    if prompt.tool_call and not answer.tool_call_parses:
        out.append("no tool call the recipe's parser parsed")
    return out


def _short(text: str | None, limit: int = 40) -> str:
    if text is None:
        return "(none)"
    return json.dumps(text if len(text) <= limit else text[:limit] + "...", ensure_ascii=False)


def references_dir(site_root: Path) -> Path:
    return site_root / CANARY_DIR


def load_references(folder: Path, deployments: list[str]) -> dict[str, CanaryReference]:
    """The recorded references of `deployments` found in `folder` (a site repo's canary/)."""
    out: dict[str, CanaryReference] = {}
    for name in deployments:
        path = folder / f"{name}.yaml"
        if path.is_file():
            out[name] = load_model(path, CanaryReference)
    return out


def _fingerprint(replica: ReplicaPlacement) -> str:
    return replica.config_fingerprint.sha256


def judge_deployment(
    replicas: list[ReplicaPlacement],
    answers: dict[int, list[Answer]],
    urls: dict[int, str],
    prompts: list[CanaryPrompt],
    reference: CanaryReference | None,
    notes: list[str],
) -> list[ReplicaVerdict]:
    """The verdicts of one deployment's asked replicas (`answers` by replica index)."""
    asked = [r for r in replicas if r.index in answers]
    verdicts = {
        r.index: ReplicaVerdict(r.deployment, r.index, r.site, r.node, urls[r.index], answers[r.index]) for r in asked
    }
    for verdict in verdicts.values():
        verdict.siblings = len(verdicts) - 1
    applies: dict[int, bool] = {}
    for r in asked:
        applies[r.index] = reference is not None and reference.fingerprint in (None, _fingerprint(r))
        verdicts[r.index].reference_matches = reference is not None and reference.fingerprint == _fingerprint(r)
    if reference is not None and not any(applies.values()):
        notes.append(
            f"{reference.deployment}: the reference in {CANARY_DIR}/{reference.deployment}.yaml was recorded for "
            "another configuration; judged by agreement only until one is recorded (`fabric canary --record`)"
        )
    for position, prompt in enumerate(prompts):
        texts = {i: answers[i][position].text for i in verdicts}
        counts = Counter(t for t in texts.values() if t is not None)
        ranked = counts.most_common()
        majority = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
        for i, verdict in verdicts.items():
            answer = answers[i][position]
            why = signal_failures(prompt, answer)
            if answer.text is not None and len(counts) > 1 and answer.text != majority:
                verdict.siblings_agree = False
                if not applies[i]:  # a reference, where one applies, says who is right
                    others = ", ".join(
                        f"{verdict.deployment}/{j}" for j in sorted(verdicts) if j != i and texts[j] != answer.text
                    )
                    why.append(f"answer {_short(answer.text)} differs from sibling(s) {others}")
            if applies[i] and reference is not None:
                recorded = reference.answers.get(prompt.name)
                agrees = recorded is not None and recorded.text == answer.text
                if recorded is None:
                    why.append(
                        f"no reference answer recorded for this prompt in {CANARY_DIR}/{verdict.deployment}.yaml"
                    )
                elif not agrees:
                    why.append(
                        f"answer {_short(answer.text)} differs from the reference {_short(recorded.text)} "
                        f"(recorded from {reference.recorded_from})"
                    )
                verdict.reference_agrees = agrees and verdict.reference_agrees is not False
            verdict.failures += [f"{prompt.name}: {w}" for w in why]
    return [verdicts[i] for i in sorted(verdicts)]


def configuration_failures(replica: ReplicaPlacement, url: str, timeout: float) -> list[str]:
    """What the engine reports running that its plan did not set (`fabric check live`'s comparison).

    Greedy answers can agree across configurations (a longer context changes no short answer), so a
    replica configured otherwise than its siblings is found by what it reports too.
    """
    check = check_replica(replica, url, timeout)
    return [
        f"configuration: {d.field} planned {json.dumps(d.planned)}, engine reports {json.dumps(d.reported)}"
        for d in check.drifts
        if d.field != REACHABLE  # an engine that does not answer already failed every prompt
    ]


def chosen_prompts(recipe_id: str, only: list[str] | None) -> list[CanaryPrompt]:
    """The recipe's canary prompts, or those of them named in `only` (UsageError naming an unknown one)."""
    prompts = get_recipe(recipe_id).canary
    if only is None:
        return prompts
    names = [p.name for p in prompts]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise UsageError(
            f"--prompt {unknown[0]}: recipe `{recipe_id}` has no canary prompt of that name",
            hint=f"its prompts: {', '.join(names) or 'none'}",
        )
    return [p for p in prompts if p.name in only]


def reference_text(reference: CanaryReference) -> str:
    header = (
        f"# The canary's reference answers of `{reference.deployment}`, recorded by `fabric canary --record` from\n"
        f"# {reference.recorded_from}; a change to them is reviewed like any other (docs/canary.md).\n"
    )
    return header + yaml.safe_dump(reference.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def run_canary(
    plan: Plan,
    endpoints: dict[tuple[str, int], str],
    references: dict[str, CanaryReference],
    *,
    timeout: float = 30.0,
    only: list[str] | None = None,
) -> CanaryRun:
    """Ask every replica of `endpoints` its recipe's canary prompts (`only` these, if given); judge the answers."""
    notes: list[str] = []
    verdicts: list[ReplicaVerdict] = []
    for name in sorted(plan.deployments):
        replicas = plan.replicas_of(name)
        asked = [r for r in replicas if (r.deployment, r.index) in endpoints]
        if not asked:
            continue
        recipe = plan.capacity_of(name).recipe
        prompts = chosen_prompts(recipe, only)
        if not prompts:
            notes.append(f"{name}: recipe `{recipe}` has no canary prompts")
            continue
        urls = {r.index: endpoints[(name, r.index)] for r in asked}
        answers = {r.index: [ask(urls[r.index], r.served_model_name, p, timeout) for p in prompts] for r in asked}
        judged = judge_deployment(replicas, answers, urls, prompts, references.get(name), notes)
        for verdict, replica in zip(judged, sorted(asked, key=lambda r: r.index), strict=True):
            verdict.failures += configuration_failures(replica, urls[replica.index], timeout)
        verdicts += judged
    unchecked = [f"{r.deployment}/{r.index}" for r in plan.replicas if (r.deployment, r.index) not in endpoints]
    return CanaryRun(verdicts, unchecked, notes)


def reference_from(run: CanaryRun, plan: Plan, deployment: str) -> CanaryReference:
    """The reference to record for `deployment` from a run where its replicas passed (UsageError otherwise)."""
    verdicts = [v for v in run.replicas if v.deployment == deployment]
    if not verdicts:
        raise UsageError(
            f"--record: no replica of `{deployment}` was asked", hint=f"pass --endpoint {deployment}/INDEX=URL"
        )
    failing = [v for v in verdicts if v.failures]
    if failing:
        first = failing[0]
        raise UsageError(
            f"--record: replica {first.name} of `{deployment}` fails its canary ({first.failures[0]}): "
            "a reference is recorded from a healthy deployment only",
            hint="fix or leave out the failing replica, or record after a deliberate change once all agree",
        )
    source = verdicts[0]
    replica = next(r for r in plan.replicas_of(deployment) if r.index == source.index)
    return CanaryReference(
        deployment=deployment,
        recipe=plan.capacity_of(deployment).recipe,
        fingerprint=_fingerprint(replica),
        recorded_from=source.name,
        answers={
            a.prompt: ReferenceAnswer(text=a.text or "", completion_tokens=a.completion_tokens) for a in source.answers
        },
    )


def exposition(run: CanaryRun) -> str:
    """The verdicts as Prometheus text, per replica (site, deployment, replica index, node)."""
    registry = CollectorRegistry()
    labels = ["site", "deployment", "replica", "node"]
    passed = Gauge(
        CANARY_PASS_METRIC, "1 when the replica passed every canary prompt, else 0.", labels, registry=registry
    )
    siblings = Gauge(
        CANARY_SIBLINGS_METRIC,
        "1 when every canary answer agreed with the deployment's other replicas.",
        labels,
        registry=registry,
    )
    reference = Gauge(
        CANARY_REFERENCE_METRIC,
        "1 when every canary answer agreed with the recorded reference (absent: none applies).",
        labels,
        registry=registry,
    )
    latency = Gauge(
        CANARY_LATENCY_METRIC,
        "Seconds the replica took to answer a canary prompt.",
        [*labels, "prompt"],
        registry=registry,
    )
    tokens = Gauge(
        CANARY_TOKENS_METRIC, "Tokens of the replica's canary answer.", [*labels, "prompt"], registry=registry
    )
    for v in run.replicas:
        values = (v.site, v.deployment, str(v.index), v.node)
        passed.labels(*values).set(0 if v.failures else 1)
        siblings.labels(*values).set(1 if v.siblings_agree else 0)
        if v.reference_agrees is not None:
            reference.labels(*values).set(1 if v.reference_agrees else 0)
        for a in v.answers:
            latency.labels(*values, a.prompt).set(a.latency_s)
            tokens.labels(*values, a.prompt).set(a.completion_tokens)
    return generate_latest(registry).decode()
