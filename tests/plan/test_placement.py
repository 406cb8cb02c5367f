"""The CP-SAT placement core and the node packing, on plain inputs."""

from __future__ import annotations

from llm_fabric.plan.solver.packing import Request, pack_class
from llm_fabric.plan.solver.placement import Demand, NodeClass, Option, PlacementProblem, solve


def _seed000() -> PlacementProblem:
    classes = [
        NodeClass("b300", ("dgx-b300-01",), 8),
        NodeClass("b200", ("dgx-b200-01",), 8),
        NodeClass("h200", ("hgx-h200",), 4, owner="ceitec"),
    ]
    demands = [
        Demand("kimi", [Option(0, 4)], replicas=1),
        Demand("glm", [Option(0, 2)], replicas=1),
        Demand("qwen", [Option(0, 2)], replicas=1),
        Demand("deepseek", [Option(1, 8)], replicas=1),
        Demand("qwen-122b", [Option(2, 2)], replicas=1, dedicated_owner="ceitec", reserved={"ceitec": 1}),
        Demand("gpt-oss", [Option(2, 1)], replicas=1),
        Demand("mistral", [Option(2, 1)], replicas=1),
    ]
    return PlacementProblem(classes, demands, pool_limits={"ceitec": 2})


def test_seed000_layout_is_optimal_and_complete() -> None:
    sol = solve(_seed000(), time_limit_s=5)
    assert sol.status == "optimal" and sol.gap == 0.0
    assert sol.missing == [0] * 7
    assert all(sum(c.values()) == 1 for c in sol.counts)
    assert sol.dedicated[4] == {0: 1}


def test_pool_cannot_take_the_dedicated_share() -> None:
    problem = _seed000()
    problem.demands.append(Demand("third-small", [Option(2, 1)], replicas=1))
    sol = solve(problem, time_limit_s=5)
    # four GPUs on the H200 node, two of them dedicated: only two pool replicas fit there
    assert sum(sol.missing[5:]) == 1
    assert sol.missing[4] == 0


def test_tensor_parallel_stays_in_one_node() -> None:
    # two 4-GPU nodes have 8 GPUs in all, but an 8-GPU replica fits in neither
    problem = PlacementProblem([NodeClass("h", ("a", "b"), 4)], [Demand("big", [Option(0, 8)], replicas=1)])
    sol = solve(problem, time_limit_s=5)
    assert sol.missing == [1] and sol.counts == [{}]


def test_mixed_sizes_respect_node_boundaries() -> None:
    # 2 nodes x 6 GPUs: three 4-GPU replicas need three nodes even though 12 GPUs are free
    problem = PlacementProblem([NodeClass("x", ("a", "b"), 6)], [Demand("d", [Option(0, 4)], replicas=3)])
    assert solve(problem, time_limit_s=5).missing == [1]


def test_target_in_sessions_picks_enough_replicas() -> None:
    problem = PlacementProblem(
        [NodeClass("h200", tuple(f"n{i}" for i in range(4)), 8)],
        [Demand("chat", [Option(0, 2, capacity=30)], sessions=100, max_replicas=4)],
    )
    sol = solve(problem, time_limit_s=5)
    assert sol.missing == [0] and sol.counts == [{0: 4}]


def test_base_plan_keeps_replicas_in_place() -> None:
    classes = [NodeClass("a", ("a1",), 8), NodeClass("b", ("b1",), 8)]
    # both classes are equally good; the base had the replica in class b
    demand = Demand("d", [Option(0, 4), Option(1, 4)], replicas=1, base={1: 1})
    sol = solve(PlacementProblem(classes, [demand]), time_limit_s=5)
    assert sol.counts == [{1: 1}] and sol.moves == 0


def test_packing_aligns_blocks_and_keeps_base_seats() -> None:
    reqs = [Request(("a", 0), 2, "n1", (6, 7)), Request(("b", 0), 4), Request(("c", 0), 2)]
    seats = pack_class(("n1",), 8, reqs)
    assert seats[("a", 0)].gpu_indices == (6, 7)
    assert seats[("b", 0)].gpu_indices == (0, 1, 2, 3)
    assert seats[("c", 0)].gpu_indices == (4, 5)


def test_packing_repacks_when_base_seats_fragment_the_node() -> None:
    # kept seats at 2-3 and 4-5 would leave no aligned 4-GPU block: the class is repacked
    reqs = [Request(("a", 0), 2, "n1", (2, 3)), Request(("b", 0), 2, "n1", (4, 5)), Request(("c", 0), 4)]
    seats = pack_class(("n1",), 8, reqs)
    used = sorted(i for s in seats.values() for i in s.gpu_indices)
    assert used == list(range(8))
