"""`fabric gateway config`: model groups per deployment and data class, allowlists, fallbacks, capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.fixtures.gateway_site import edit_yaml, issue_keys, make_gateway_plan, make_gateway_site

from llm_fabric.cli.main import main
from llm_fabric.errors import UsageError
from llm_fabric.gateway.runtime.settings import HookSettings, load_settings


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], HookSettings, Path]:
    root = tmp_path_factory.mktemp("gateway-config")
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)
    issue_keys(repo)
    out = root / "out"
    assert main(["gateway", "config", "-C", str(repo), "--plan", str(plan), "--site", "brno", "--out", str(out)]) == 0
    config = yaml.safe_load((out / "litellm-config.yaml").read_text())
    return config, load_settings(out / "fabric-gateway.json"), out


def _entries(config: dict[str, object], group: str) -> list[dict[str, object]]:
    return [m for m in config["model_list"] if m["model_name"] == group]  # type: ignore[index, union-attr]


def test_a_group_per_deployment_and_class_holds_only_allowed_sites(generated) -> None:  # type: ignore[no-untyped-def]
    config, settings, _ = generated
    # sensitive data may be processed only in CZ (the example's policy): vienna (AT) is not in its group
    assert settings.groups["qwen3-5@sensitive"].sites == ["brno"]
    assert settings.groups["qwen3-5@public"].sites == ["brno"]  # its own site's replicas first
    assert [m["model_info"]["fabric_site"] for m in _entries(config, "qwen3-5@sensitive")] == ["brno"]
    # each replica at its own direct Service, which the canary's rotation can take out (issue 39 F7)
    assert [m["litellm_params"]["api_base"] for m in _entries(config, "qwen3-5@public")] == [
        "http://qwen3-5-0-direct.llm-fabric.svc.cluster.local:80/v1"
    ]
    assert [m["model_info"]["fabric_replica"] for m in _entries(config, "qwen3-5@public")] == ["qwen3-5/0"]
    # vienna only through Vienna's gateway (gateway.sites.vienna.url), asked for the same group, with the peer key
    assert settings.groups["qwen3-5@public~vienna"].sites == ["vienna"]
    (relay,) = _entries(config, "qwen3-5@public~vienna")
    assert relay["litellm_params"]["api_base"] == "http://gateway.vienna.example/v1"
    assert relay["litellm_params"]["model"] == "hosted_vllm/qwen3-5@public"
    assert relay["litellm_params"]["api_key"] == "os.environ/FABRIC_GATEWAY_PEER_KEY"
    assert relay["model_info"]["fabric_relay"] == "vienna"
    assert not [
        m
        for m in config["model_list"]
        if "vienna.example" in m["litellm_params"]["api_base"]  # type: ignore[union-attr, index]
        and "gateway." not in m["litellm_params"]["api_base"]
    ]  # type: ignore[index]


def test_only_classes_that_allow_it_fall_back_to_the_external_provider(generated) -> None:  # type: ignore[no-untyped-def]
    config, settings, _ = generated
    # first the other sites the class's rule allows (through their gateways), then the providers that take it
    assert settings.groups["qwen3-5@public"].fallbacks == ["qwen3-5@public~vienna", "external-cloud"]
    assert settings.groups["qwen3-5@internal"].fallbacks == ["qwen3-5@internal~vienna"]
    assert settings.groups["qwen3-5@sensitive"].fallbacks == []  # CZ only: no other site, no provider
    fallbacks = config["router_settings"]["fallbacks"]  # type: ignore[index]
    externals = {f for chain in fallbacks for targets in chain.values() for f in targets if f.startswith("external-")}
    assert externals == {"external-cloud"}
    assert all(
        settings.groups[g].data_class == "public"
        for chain in fallbacks
        for g, t in chain.items()
        if "external-cloud" in t
    )
    cloud = _entries(config, "external-cloud")[0]
    assert cloud["litellm_params"]["api_key"] == "os.environ/CLOUD_API_KEY"


def test_tenants_get_hashes_limits_and_an_allowlist_of_their_classes(generated) -> None:  # type: ignore[no-untyped-def]
    _, settings, out = generated
    clinic = settings.tenants["fnusa-clinical"]
    assert clinic.data_classes == ["sensitive"]
    assert {g for by in clinic.groups.values() for g in by.values()} == {"qwen3-5@sensitive", "qwen3-5-122b@sensitive"}
    muni = settings.tenants["muni-researchers"]
    assert muni.data_classes == ["internal", "public"]  # the most sensitive first: the default
    assert muni.max_concurrent_requests == 24 and muni.requests_per_minute == 600
    assert all(len(h) == 64 for t in settings.tenants.values() for h in t.key_sha256)
    assert "fk-" not in (out / "fabric-gateway.json").read_text() + (out / "litellm-config.yaml").read_text()


def test_capacity_from_the_plan_with_the_owners_reserve(generated) -> None:  # type: ignore[no-untyped-def]
    config, settings, _ = generated
    dedicated = settings.deployments["qwen3-5-122b"]
    assert (dedicated.capacity, dedicated.owner, dedicated.owner_reserved) == (4, "ceitec-structural", 1)
    assert dedicated.priority_scheduling and dedicated.engine == "vllm"
    # the engine helper's numbers (llm_fabric.engine.request_hooks): the owner's request goes first
    assert (dedicated.owner_fields, dedicated.pool_fields) == ({"priority": 0}, {"priority": 10})
    shared = settings.deployments["qwen3-5"]
    assert (shared.capacity, shared.owner, shared.priority_scheduling) == (8, None, False)
    assert shared.owner_fields == shared.pool_fields == {}  # vLLM without priority scheduling: nothing to send
    per_site = [
        m["litellm_params"]["max_parallel_requests"]
        for g in ("qwen3-5@public", "qwen3-5@public~vienna")
        for m in _entries(config, g)
    ]
    assert per_site == [4, 4]  # 8 sessions over two replicas, one per site


def test_fair_shares_from_the_allocation_bands(generated) -> None:  # type: ignore[no-untyped-def]
    _, settings, _ = generated
    # the owner of a deployment all its own that it lends keeps its reserve; the rest is lent, split equally
    dedicated = settings.deployments["qwen3-5-122b"]
    allowed = sorted(t for t, a in settings.tenants.items() if "qwen3-5-122b" in a.groups)
    assert dedicated.lent and sorted(dedicated.fair_shares) == allowed and len(allowed) > 2
    others = [v for t, v in dedicated.fair_shares.items() if t != "ceitec-structural"]
    assert dedicated.fair_shares["ceitec-structural"] == 1.0
    assert others == [3.0 / len(others)] * len(others)
    # a pool deployment: equal shares of the whole capacity
    shared = settings.deployments["qwen3-5"]
    assert not shared.lent and set(shared.fair_shares.values()) == {8 / len(shared.fair_shares)}


def test_hooks_and_no_database_in_the_litellm_config(generated) -> None:  # type: ignore[no-untyped-def]
    config, _, _ = generated
    assert config["general_settings"]["custom_auth"] == "llm_fabric.gateway.runtime.hooks.user_api_key_auth"
    assert config["litellm_settings"]["callbacks"] == ["llm_fabric.gateway.runtime.hooks.fabric_hooks", "prometheus"]
    assert "database_url" not in json.dumps(config)


def test_settings_that_are_not_the_gateways_are_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "fabric-gateway.json"
    bad.write_text('{"version": 1, "federation": "x"}')
    with pytest.raises(UsageError, match="gateway hook settings is not valid"):
        load_settings(bad)


def test_an_unknown_site_in_the_gateway_section_names_the_field(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    edit_yaml(site_repo / "fabric.yaml", lambda d: d["gateway"].update(sites={"nowhere": {}}))
    assert main(["gateway", "config", "-C", str(site_repo), "--out", str(site_repo.parent / "gw")]) == 2
    err = capsys.readouterr().err
    assert "fabric.yaml" in err and "gateway names unknown site(s) nowhere" in err


def test_a_site_repo_with_the_one_federation_gateway_is_told_what_to_write(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An old fabric.yaml (one gateway at `gateway.site`, other sites' engines at `remote_endpoints`) is refused,
    naming both fields and what replaces them: its URLs point at engines, which no gateway may reach directly."""
    old = {"site": "brno", "remote_endpoints": {"vienna": "https://{deployment}.llm.vsc.example/v1"}}
    edit_yaml(site_repo / "fabric.yaml", lambda d: d.update(gateway=old))
    assert main(["validate", "-C", str(site_repo)]) == 2
    err = "".join(capsys.readouterr())
    assert "fabric.yaml:" in err and "gateway: `gateway.site` is gone: every site now runs its own gateway" in err
    assert "write `gateway.sites.vienna.url: <vienna's gateway>/v1` in its place" in err


def test_vienna_s_gateway_takes_no_sensitive_data(tmp_path: Path) -> None:
    """A request enters only at a gateway in a jurisdiction its class allows: Vienna (AT) admits public and internal
    data, serves what it has, relays the rest to Brno's gateway, and names Brno's gateway to a sensitive request."""
    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.gateway.runtime.policy import Denial, route
    from llm_fabric.plan.document import load_plan
    from llm_fabric.trust.sites import load_trusted_site

    repo = make_gateway_site(tmp_path / "site")
    plan = load_plan(make_gateway_plan(repo, tmp_path))
    files = build_gateway(load_trusted_site(repo), plan, site_id="vienna")
    assert not [g for g, spec in files.settings.groups.items() if spec.data_class == "sensitive"]
    assert "`sensitive` data does not enter at vienna: its sovereignty rule does not allow the site" in files.notes
    assert files.settings.groups["qwen3-5@public"].sites == ["vienna"]
    assert files.settings.groups["qwen3-5@public"].fallbacks == ["qwen3-5@public~brno", "external-cloud"]
    # qwen3-5-122b has no replica in Vienna: Brno's gateway serves it, and nothing else may
    assert files.settings.groups["qwen3-5-122b@internal"].sites == ["brno"]
    assert files.settings.groups["qwen3-5-122b@internal"].fallbacks == []
    (entry,) = [m for m in files.litellm["model_list"] if m["model_name"] == "qwen3-5-122b@internal"]
    assert entry["litellm_params"]["api_base"] == "http://gateway.brno.example/v1"
    denied = route(files.settings, "fnusa-clinical", "qwen3-5", None)
    assert denied == Denial(
        403,
        "`sensitive` data may not enter the gateway at `vienna`: its sovereignty rule does not allow the site; "
        "send it to the gateway at brno",
    )


def test_validate_refuses_a_class_without_a_gateway_it_may_enter(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    edit_yaml(site_repo / "fabric.yaml", lambda d: d.update(gateway={"sites": {"vienna": {"url": "https://gw.at/v1"}}}))
    assert main(["validate", "-C", str(site_repo)]) == 3
    text = "".join(capsys.readouterr())
    assert "fabric.yaml:" in text and "gateway.sites" in text
    assert (
        "no gateway may take `sensitive` data: it runs at vienna, where its sovereignty rule keeps that data out "
        "(`sensitive` data may be processed only in CZ; site `vienna` is in AT)"
    ) in text
    assert "run a gateway at brno: add `brno:` under gateway.sites, with its url" in text


def test_a_replica_on_an_altered_node_manifest_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    repo = make_gateway_site(tmp_path / "site")
    plan = make_gateway_plan(repo, tmp_path)
    node = repo / "nodes" / "vienna-01.yaml"
    node.write_text(node.read_text().replace("count: 8", "count: 7"))  # a claim changed after signing
    out = str(tmp_path / "out")
    assert main(["gateway", "config", "-C", str(repo), "--plan", str(plan), "--site", "brno", "--out", out]) == 3
    err = capsys.readouterr().err
    assert "vienna-01" in err and "signature does not match" in err


def test_validate_refuses_an_external_provider_for_a_class_that_may_not_leave(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cloud = {"url": "https://api.cloud.example/v1", "model": "m", "data_classes": ["public", "sensitive"]}
    edit_yaml(site_repo / "fabric.yaml", lambda d: d["gateway"].update(external={"cloud": cloud}))
    assert main(["validate", "-C", str(site_repo)]) == 3
    err = capsys.readouterr()
    text = err.out + err.err
    assert "external provider `cloud` takes `sensitive` data" in text and "fabric.yaml" in text


def test_validate_finds_one_key_under_two_tenants(site_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["tenants", "key", "issue", "-C", str(site_repo), "muni-researchers"]) == 0
    muni = (site_repo / "tenants" / "muni-researchers.yaml").read_text()
    keys = muni[muni.index("keys:") :]
    clinic = site_repo / "tenants" / "fnusa-clinical.yaml"
    clinic.write_text(clinic.read_text() + keys)
    assert main(["validate", "-C", str(site_repo)]) == 2
    text = "".join(capsys.readouterr())
    assert "is also a key of tenant `fnusa-clinical`" in text or "is also a key of tenant `muni-researchers`" in text


def test_an_sglang_deployment_gets_the_engine_helpers_fields(tmp_path: Path) -> None:
    from llm_fabric.engine.request_hooks import request_fields
    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.plan.document import load_plan
    from llm_fabric.trust.sites import load_trusted_site

    repo = make_gateway_site(tmp_path / "site")
    plan = load_plan(make_gateway_plan(repo, tmp_path))
    replicas = []
    for r in plan.replicas:
        if r.deployment == "qwen3-5-122b":  # as the SGLang command builder writes a dedicated replica's flags
            args = [*r.engine_args, "--enable-priority-scheduling", "--schedule-low-priority-values-first"]
            r = r.model_copy(update={"engine": "sglang", "engine_args": args})
        replicas.append(r)
    files = build_gateway(load_trusted_site(repo), plan.model_copy(update={"replicas": replicas}), site_id="brno")
    dep = files.settings.deployments["qwen3-5-122b"]
    assert dep.engine == "sglang"
    assert dep.owner_fields == request_fields("sglang", owner=True)
    assert dep.pool_fields["priority"] == 10 and "custom_logit_processor" in dep.pool_fields


def test_the_gateway_takes_only_a_site_the_trust_gate_passed(tmp_path: Path) -> None:
    """build_gateway (also reached by render's gateway bundles) takes a TrustedSite, which only the gate makes."""
    from llm_fabric.errors import PolicyRefusal
    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site
    from llm_fabric.trust.sites import TrustedSite, load_trusted_site

    repo = make_gateway_site(tmp_path / "site")
    plan = load_plan(make_gateway_plan(repo, tmp_path))
    brno = [r for r in plan.replicas if r.site == "brno"]
    assert build_gateway(load_trusted_site(repo), plan, site_id="brno").settings.deployments
    with pytest.raises(TypeError, match="made only by load_trusted_site"):
        TrustedSite(root=repo, config=load_site(repo).config)
    node = repo / "nodes" / f"{brno[0].node}.yaml"
    original = node.read_text()
    node.write_text(original.replace("memory_gb: 2048", "memory_gb: 1024"))  # changed after it was signed
    with pytest.raises(PolicyRefusal) as refused:
        load_trusted_site(repo)
    assert "untrusted nodes are never planned" in refused.value.message
    assert any(brno[0].node in p.message for p in refused.value.problems)
    node.write_text(original)
    # a plan older than the site repo: a replica on a node the repo does not have
    moved = brno[0].model_copy(update={"node": "gone-01"})
    stale_plan = plan.model_copy(update={"replicas": [moved, *(r for r in plan.replicas if r is not brno[0])]})
    with pytest.raises(PolicyRefusal) as stale:
        build_gateway(load_trusted_site(repo), stale_plan, site_id="brno")
    assert "`gone-01`, which the site repo does not have" in stale.value.problems[0].message
    assert f"fabric plan -C {repo} -o FILE" in (stale.value.problems[0].hint or "")


def test_a_plan_that_still_routes_to_a_retired_node_is_refused(tmp_path: Path) -> None:
    """`fabric nodes retire` after `fabric plan`: the old plan's replica there is stale, not served."""
    from tests.fixtures.cli import fabric

    from llm_fabric.errors import PolicyRefusal
    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import collect_site

    repo = make_gateway_site(tmp_path / "site")
    plan = load_plan(make_gateway_plan(repo, tmp_path))
    node = next(r.node for r in plan.replicas if r.site == "brno")
    retired = fabric("nodes", "retire", node, "-C", str(repo), "--no-drain")
    assert retired.returncode == 0, retired.stdout
    site, _ = collect_site(repo)  # as it is: validate may have more to say about the retirement
    assert site is not None
    with pytest.raises(PolicyRefusal) as stale:
        build_gateway(site, plan, site_id="brno")
    assert any(f"node `{node}`, which is retired" in p.message for p in stale.value.problems)


def test_an_installed_fabric_without_litellm_is_told_how_to_give_it_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 41 point 7: from a wheel there is no .venv-gateway; the hint names FABRIC_GATEWAY_PYTHON and the pins
    import llm_fabric.gateway.run as run
    from llm_fabric.errors import UsageError

    monkeypatch.delenv("FABRIC_GATEWAY_PYTHON", raising=False)
    monkeypatch.setattr(run, "checkout_root", lambda: tmp_path)  # a wheel's site-packages holds no .venv-gateway
    with pytest.raises(UsageError) as refused:
        run.gateway_python()
    hint = refused.value.hint or ""
    assert "LiteLLM is not installed for the fabric" in refused.value.message
    assert "pip install 'litellm[proxy]==1.108.7'" in hint and "export FABRIC_GATEWAY_PYTHON=" in hint
    gateway_venv = Path(__file__).resolve().parents[2] / ".venv-gateway" / "bin" / "python"
    monkeypatch.setenv("FABRIC_GATEWAY_PYTHON", str(gateway_venv))  # the hint's last step, followed
    assert run.gateway_python() == gateway_venv
