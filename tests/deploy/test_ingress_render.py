"""Who may reach the engines and the canary prober, as rendered (issue 39, F6 and F8).

An engine has no key: a pod that reaches it passes by the gateway's keys, limits, budgets and meter, and
an SGLang engine with the loop guard takes a request's custom logit processor (code). The prober takes
drain notices, each of which takes a replica out of rotation. Both get an ingress NetworkPolicy that
admits only the site's gateway, the prober or the engines, and the site's Prometheus; the prober's write
token is a Secret reference, never a value in the rendered files. Rendered by the real commands and
checked against the real schemas (`render --check`, ../shared/crds).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.sglang.command import sglang_command
from llm_fabric.hardware.catalog import load_gpu_catalog
from tests.deploy.rendered_site import Rendered, render_reference

GATEWAY = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "gateway", "app.kubernetes.io/name": "litellm"}}
}
PROBER = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "canary", "app.kubernetes.io/name": "fabric-canary"}}
}
ENGINES = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": "llm-fabric"}}
}
PROMETHEUS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return render_reference(tmp_path_factory.mktemp("ingress"))


def serving(rendered: Rendered, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((rendered.out / "brno" / "serving" / name).read_text())
    return loaded


def test_only_the_gateway_the_prober_and_prometheus_reach_an_engine(rendered: Rendered) -> None:
    policy = serving(rendered, "networkpolicy-llm-fabric-serving-ingress.yaml")
    assert policy["spec"]["podSelector"] == {"matchLabels": ENGINES["podSelector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    api, workers = policy["spec"]["ingress"]
    assert api == {"from": [GATEWAY, PROBER, PROMETHEUS], "ports": [{"protocol": "TCP", "port": 8000}]}
    # a multi-node replica's workers reach their leader (its data-parallel RPC), nobody else unnamed
    assert workers == {
        "from": [
            {
                "podSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/component": "engine-worker",
                        "app.kubernetes.io/part-of": "llm-fabric",
                    }
                }
            }
        ]
    }


def test_only_the_gateway_the_engines_and_prometheus_reach_the_prober(rendered: Rendered) -> None:
    policy = serving(rendered, "networkpolicy-fabric-canary-ingress.yaml")
    assert policy["spec"]["podSelector"] == {"matchLabels": PROBER["podSelector"]["matchLabels"]}
    assert policy["spec"]["ingress"] == [
        {"from": [GATEWAY, ENGINES, PROMETHEUS], "ports": [{"protocol": "TCP", "port": 9400}]}
    ]


def test_the_drain_notices_carry_a_token_from_a_secret_no_file_holds(rendered: Rendered) -> None:
    prober = serving(rendered, "deployment-fabric-canary.yaml")["spec"]["template"]["spec"]
    (container,) = prober["containers"]
    args = container["args"]
    assert args[args.index("--write-token-file") + 1] == "/etc/fabric-canary-token/token"
    token = {"name": "canary-token", "mountPath": "/etc/fabric-canary-token", "readOnly": True}
    assert token in container["volumeMounts"]
    secret = {
        "secretName": "fabric-canary-token",
        "items": [{"key": "token", "path": "token"}],
        "defaultMode": 0o400,
        "optional": True,
    }
    assert {"name": "canary-token", "secret": secret} in prober["volumes"]
    engine = serving(rendered, "deployment-qwen3-5-0.yaml")["spec"]["template"]["spec"]
    (served,) = engine["containers"]
    drain = served["lifecycle"]["preStop"]["exec"]["command"]
    assert drain[drain.index("--notice-token-file") + 1] == "/etc/fabric-canary-token/token"
    assert token in served["volumeMounts"] and {"name": "canary-token", "secret": secret} in engine["volumes"]
    # the token itself is made by the operator (docs/canary.md): no rendered file holds a Secret
    files = list(rendered.out.rglob("*.yaml"))
    assert files and not [p for p in files if "kind: Secret\n" in p.read_text()]


def test_sglang_takes_custom_logit_processors_only_for_the_loop_guard() -> None:
    recipe = load_recipes()["qwen3.5"]
    gpu = load_gpu_catalog().get("h200")
    tp = max(t for t in recipe.tensor_parallel_sizes if t <= 8)
    guarded = sglang_command(ServingArgs(recipe, gpu=gpu, tensor_parallel_size=tp)).args
    unguarded = sglang_command(ServingArgs(recipe, gpu=gpu, tensor_parallel_size=tp, loop_guard=False)).args
    assert "--enable-custom-logit-processor" in guarded
    assert "--enable-custom-logit-processor" not in unguarded
