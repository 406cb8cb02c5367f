"""The loop detector on crafted token sequences: cycles of every period 1-64 trigger, near-repeats and text do not."""

from __future__ import annotations

import random

import pytest

from llm_fabric.engine.runtime.loop_detect import LoopDetector, LoopGuardSettings, find_loop

DEFAULT = LoopGuardSettings()


def cycle(period: int, repeats: int, *, base: int = 1000) -> list[int]:
    block = [base + k for k in range(period)]
    return block * repeats


def naive_first_loop(tokens: list[int], s: LoopGuardSettings) -> tuple[int, int] | None:
    """The definition, checked by brute force: the first i where some period p has a long enough periodic tail."""
    for i in range(len(tokens)):
        for p in range(1, s.max_period + 1):
            need = max(s.min_repeats * p, s.min_span)
            start = i - need + 1
            if start < 0:
                continue
            if all(tokens[k] == tokens[k - p] for k in range(start + p, i + 1)):
                return i, p
    return None


@pytest.mark.parametrize("period", range(1, 65))
def test_every_period_up_to_64_is_caught_where_the_definition_says(period: int) -> None:
    prefix = [7, 8, 9, 10, 11]
    tokens = prefix + cycle(period, 80)
    found = find_loop(tokens, DEFAULT)
    assert found is not None
    position, got_period = found
    need = max(DEFAULT.min_repeats * period, DEFAULT.min_span)
    assert position == len(prefix) + need - 1  # the token that completes the required span, not later
    assert got_period == period


def test_periods_beyond_the_window_are_not_loops() -> None:
    s = LoopGuardSettings(max_period=16, min_repeats=4, min_span=32)
    assert find_loop(cycle(17, 20), s) is None
    assert find_loop(cycle(16, 20), s) == (63, 16)


def test_the_eight_token_loop_of_seed_000_is_stopped_after_64_tokens() -> None:
    found = find_loop([1, 2, 3, *cycle(8, 1000)], DEFAULT)
    assert found == (3 + 64 - 1, 8)


def test_near_repeats_with_a_changing_token_do_not_trigger() -> None:
    # "item 1, item 2, ..." : a cycle whose last token changes every time never repeats exactly
    tokens: list[int] = []
    for n in range(400):
        tokens += [50, 51, 52, 53, 54, 55, 56, 2000 + n]
    assert find_loop(tokens, DEFAULT) is None


def test_one_token_off_in_every_third_repeat_does_not_trigger() -> None:
    tokens: list[int] = []
    for n in range(300):
        block = [60, 61, 62, 63, 64, 65]
        if n % 3 == 2:
            block[n % 6] = 100 + n  # a different slip each time: no longer cycle hides in the slips
        tokens += block
    assert find_loop(tokens, DEFAULT) is None


def test_short_rulers_and_repeated_words_are_not_loops() -> None:
    ruler = [5] * 40  # a 40-character "-----" line
    words = [10, 11] * 20
    text = [20, 21, 22, *ruler, 23, 24, *words, 25, 26]
    assert find_loop(text, DEFAULT) is None


def test_a_run_of_exclamation_marks_is_a_loop() -> None:
    assert find_loop([30, 31] + [33] * 200, DEFAULT) == (2 + 64 - 1, 1)


def test_random_text_does_not_trigger_and_matches_the_brute_force_definition() -> None:
    rng = random.Random(8)
    # Zipf-like token frequencies, as in text: a few very common tokens
    vocab = list(range(3000))
    weights = [1.0 / (k + 1) for k in vocab]
    tokens = rng.choices(vocab, weights, k=20_000)
    assert find_loop(tokens, DEFAULT) is None


@pytest.mark.parametrize("seed", range(25))
def test_agrees_with_the_brute_force_definition_on_small_alphabets(seed: int) -> None:
    rng = random.Random(seed)
    s = LoopGuardSettings(max_period=rng.randint(1, 12), min_repeats=rng.randint(2, 5), min_span=rng.randint(2, 20))
    tokens: list[int] = []
    while len(tokens) < 300:
        if rng.random() < 0.3:
            tokens += [rng.randint(0, 3) for _ in range(rng.randint(1, 6))] * rng.randint(1, 8)
        else:
            tokens.append(rng.randint(0, 5))
    assert find_loop(tokens, s) == naive_first_loop(tokens, s)


def test_detector_stays_triggered_and_counts_tokens() -> None:
    d = LoopDetector(LoopGuardSettings(max_period=4, min_repeats=3, min_span=6))
    assert not d.feed_all([1, 2, 1, 2, 1])
    assert d.feed(2)
    assert d.period == 2
    assert d.feed(9)  # once looping, the generation is ended: the verdict does not flip back
    assert d.tokens_seen == 7


def test_settings_round_trip_through_the_engine_environment() -> None:
    s = LoopGuardSettings(enabled=False, max_period=32, min_repeats=6, min_span=48)
    assert LoopGuardSettings.from_env(s.to_env()) == s
    assert LoopGuardSettings.from_env({}) == LoopGuardSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FABRIC_LOOP_GUARD_MAX_PERIOD": "lots"}, "must be an integer"),
        ({"FABRIC_LOOP_GUARD_MAX_PERIOD": "0"}, "between 1 and 1024"),
        ({"FABRIC_LOOP_GUARD_MIN_REPEATS": "1"}, "at least 2"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoopGuardSettings.from_env(env)


def test_every_phase_of_a_loop_against_the_checkpoints_is_caught_on_time() -> None:
    # the detector looks up periods only every min(need) tokens (48 here): a loop may start anywhere
    for period in (1, 2, 3, 7, 8, 16, 17, 31, 64):
        need = max(DEFAULT.min_repeats * period, DEFAULT.min_span)
        for prefix_len in range(0, 60):
            prefix = list(range(5000, 5000 + prefix_len))
            assert find_loop(prefix + cycle(period, 300 // period + 4), DEFAULT) == (prefix_len + need - 1, period)


def nested_stream(rng: random.Random, length: int) -> list[int]:
    """Text with cycles whose block is itself periodic ("aab aab", "!!!!" inside a longer cycle), near misses."""
    tokens: list[int] = []
    while len(tokens) < length:
        kind = rng.random()
        if kind < 0.35:
            tokens += [rng.randint(0, 9) for _ in range(rng.randint(1, 30))]
        elif kind < 0.7:
            inner = [rng.randint(0, 2) for _ in range(rng.randint(1, 3))] * rng.randint(1, 5)
            block = inner + [rng.randint(0, 3) for _ in range(rng.randint(0, 2))]
            tokens += block * rng.randint(2, 12)
        else:
            tokens += [rng.randint(0, 2)] * rng.randint(1, 40)
    return tokens[:length]


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_the_brute_force_definition_on_nested_cycles_and_long_spans(seed: int) -> None:
    # spans long against the checkpoint interval and cycles that are multiples of shorter ones (Fine-Wilf skip)
    rng = random.Random(1000 + seed)
    s = LoopGuardSettings(max_period=rng.randint(1, 24), min_repeats=rng.randint(2, 6), min_span=rng.randint(2, 70))
    tokens = nested_stream(rng, 500)
    expected = naive_first_loop(tokens, s)
    assert find_loop(tokens, s) == expected
    for cut in range(0, 40, 7):  # the same stream entered at other phases against the checkpoints
        assert find_loop(tokens[cut:], s) == naive_first_loop(tokens[cut:], s)


def test_a_short_cycle_inside_a_longer_one_reports_the_period_of_the_definition() -> None:
    # 12-periodic for long, then only 4-periodic at the end: the 12 must not be hidden by the 4
    s = LoopGuardSettings(max_period=16, min_repeats=3, min_span=30)
    tokens = [90, 91] + [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8] * 3 + [1, 2, 3, 4] * 12
    assert find_loop(tokens, s) == naive_first_loop(tokens, s)
    assert find_loop(tokens, s) is not None
