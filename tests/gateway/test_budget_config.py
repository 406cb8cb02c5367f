"""Config time of the shared counters, budgets and key lifetimes: validate, `gateway config`, render, keys."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.fixtures.gateway_site import edit_yaml, issue_keys, make_gateway_plan, make_gateway_site

from llm_fabric.cli.main import main
from llm_fabric.gateway.runtime.settings import load_settings

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


@pytest.fixture(scope="module")
def site_and_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("budget-config")
    repo = make_gateway_site(root / "site")
    edit_yaml(repo / "fabric.yaml", lambda d: d["gateway"].update(counters={}))
    edit_yaml(repo / "tenants" / "muni-researchers.yaml", lambda d: d["limits"].update(price_per_month=250))
    plan = make_gateway_plan(repo, root)
    issue_keys(repo)
    return repo, plan


def _copy(repo: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(repo, copy)
    return copy


def test_validate_refuses_several_replicas_without_a_shared_store(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    def several(data: dict[str, Any]) -> None:
        data["gateway"].pop("counters", None)
        data["gateway"]["replicas"] = 3

    edit_yaml(site_repo / "fabric.yaml", several)
    assert main(["validate", "-C", str(site_repo)]) == 2
    text = "".join(capsys.readouterr())
    assert "fabric.yaml:" in text and "gateway.replicas" in text
    assert "gateway.replicas is 3 but the gateway has no shared counter store: each pod would enforce" in text
    assert "add `counters: {}` under gateway" in text and "or replicas: 1" in text


def test_validate_takes_several_replicas_with_a_store(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    edit_yaml(site_repo / "fabric.yaml", lambda d: d["gateway"].update(replicas=3, counters={}))
    main(["validate", "-C", str(site_repo)])
    assert "shared counter store" not in "".join(capsys.readouterr())


def test_validate_refuses_budget_shares_above_the_whole(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    shares = {"brno": 0.8, "vienna": 0.4, "graz": 0.1}
    edit_yaml(site_repo / "fabric.yaml", lambda d: d["gateway"].update(budget_shares=shares))
    assert main(["validate", "-C", str(site_repo)]) == 2
    text = "".join(capsys.readouterr())
    assert "gateway.budget_shares add up to 1.3: the sites together would admit more than the budget" in text
    assert "gateway.budget_shares names site `graz`, which fabric.yaml does not have" in text


def test_the_settings_carry_budgets_prices_the_store_and_restriction(
    site_and_plan: tuple[Path, Path], tmp_path: Path
) -> None:
    repo, plan = site_and_plan
    gateway = ["gateway", "config", "-C", str(repo), "--plan", str(plan), "--site", "brno"]
    assert main([*gateway, "--out", str(tmp_path / "gw")]) == 0
    settings = load_settings(tmp_path / "gw" / "fabric-gateway.json")
    clinic, muni, throttled = (settings.tenants[n] for n in ("fnusa-clinical", "muni-researchers", "throttled"))
    # the whole budget: brno is the only gateway a sensitive tenant's data may enter (a store per site)
    assert clinic.tokens_per_month == 2_000_000_000
    assert main([*gateway[:-1], "vienna", "--out", str(tmp_path / "gw-vienna")]) == 0
    vienna = load_settings(tmp_path / "gw-vienna" / "fabric-gateway.json")
    assert "fnusa-clinical" not in vienna.tenants or vienna.tenants["fnusa-clinical"].tokens_per_month in (0, None)
    assert str(muni.price_per_month) == "125.00" and settings.currency == "USD"  # half: it may enter at both
    assert clinic.fail_closed and muni.fail_closed  # sensitive, internal: may not leave the federation
    assert not throttled.fail_closed  # public only
    assert str(settings.prices["qwen3-5"].output) == "1.56"  # ledger.yaml's reference prices
    assert settings.counters is not None
    # the Redis rendered beside the gateway (`gateway run` leaves it to $FABRIC_GATEWAY_COUNTERS_URL)
    assert settings.counters.url == "redis://fabric-gateway-counters.llm-fabric.svc.cluster.local:6379/0"
    assert settings.counters.prefix == "fabric:cerit-sc:"


def test_render_puts_a_redis_beside_the_gateway_and_names_it(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    repo, plan = site_and_plan
    out = tmp_path / "out"
    argv = ["render", "-C", str(repo), "--site", "brno", "--plan", str(plan), "--out", str(out)]
    assert main([*argv, "--check", "--crds", str(SHARED / "crds")]) == 0
    serving = {p.name: yaml.safe_load(p.read_text()) for p in (out / "brno" / "serving").glob("*.yaml")}
    redis = serving["statefulset-fabric-gateway-counters.yaml"]["spec"]
    assert redis["replicas"] == 1
    assert "--appendonly" in redis["template"]["spec"]["containers"][0]["args"]
    assert redis["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    ingress = serving["networkpolicy-fabric-gateway-counters-ingress.yaml"]["spec"]
    gateway_pods = {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/component": "gateway"}
    assert ingress["ingress"][0]["from"] == [{"podSelector": {"matchLabels": gateway_pods}}]
    assert "networkpolicy-fabric-gateway-counters-egress.yaml" in serving
    config = json.loads(serving["configmap-fabric-gateway.yaml"]["data"]["fabric-gateway.json"])
    assert config["counters"]["url"] == "redis://fabric-gateway-counters.llm-fabric.svc.cluster.local:6379/0"


def test_an_operators_redis_is_named_and_not_rendered(site_and_plan: tuple[Path, Path], tmp_path: Path) -> None:
    repo, plan = site_and_plan
    copy = _copy(repo, tmp_path)
    url = "rediss://counters.cerit-sc.example:6380/0"
    edit_yaml(copy / "fabric.yaml", lambda d: d["gateway"].update(counters={"url": url}))
    out = tmp_path / "out"
    assert main(["render", "-C", str(copy), "--site", "brno", "--plan", str(plan), "--out", str(out)]) == 0
    names = {p.name for p in (out / "brno" / "serving").glob("*.yaml")}
    assert not [n for n in names if "counters" in n]
    config = yaml.safe_load((out / "brno" / "serving" / "configmap-fabric-gateway.yaml").read_text())
    assert json.loads(config["data"]["fabric-gateway.json"])["counters"]["url"] == url


def test_a_key_with_an_expiry_is_listed_and_reaches_the_settings(
    site_and_plan: tuple[Path, Path], tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    repo, plan = site_and_plan
    copy = _copy(repo, tmp_path)
    capsys.readouterr()
    argv = ["tenants", "key", "issue", "-C", str(copy), "throttled", "--expires-at", "2031-06-30", "--json"]
    assert main(argv) == 0
    key_id = json.loads(capsys.readouterr().out)["key_id"]
    assert main(["tenants", "key", "list", "-C", str(copy), "throttled"]) == 0
    listed = capsys.readouterr().out
    assert f"{key_id}  issued " in listed and "  expires 2031-06-30T00:00:00+00:00" in listed
    assert "  does not expire" in listed  # the key issue_keys gave it
    assert (
        main(
            ["gateway", "config", "-C", str(copy), "--plan", str(plan), "--site", "brno", "--out", str(tmp_path / "gw")]
        )
        == 0
    )
    settings = load_settings(tmp_path / "gw" / "fabric-gateway.json")
    assert settings.tenants["throttled"].key_expiry[key_id].isoformat() == "2031-06-30T00:00:00+00:00"


def test_a_key_that_would_expire_before_it_is_issued_is_refused(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    argv = ["tenants", "key", "issue", "-C", str(site_repo), "muni-researchers", "--expires-at", "2020-01-01"]
    assert main(argv) == 2
    text = "".join(capsys.readouterr())
    assert "the key would expire at 2020-01-01T00:00:00+00:00, before it is issued" in text
    assert "give a later --expires-at" in text
