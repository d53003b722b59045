"""Progress of long work (issue #50, ``advisor.progress``): the time left comes from the
measured rate, "estimating..." until there is one, and plain lines never flood. On a clock the
test owns: nothing here is timed."""

from __future__ import annotations

from short_runs import Clock

from advisor.progress import Meter, PlainLines, ScreenProgress


def test_the_time_left_is_estimating_until_an_item_is_done_then_the_measured_rate() -> None:
    clock = Clock()
    meter = Meter(clock)
    first = meter.update("screen", 0, 100)
    assert first.left_s is None and first.left_text == "estimating..."
    clock.t = 5.0  # a stage's preparation (this machine's probes): no item counted yet
    assert meter.update("screen:screening 100 pairs (batch 256)", 0, 100).left_s is None
    clock.t = 15.0
    reading = meter.update("screen:screening 100 pairs (batch 256)", 20, 100)
    # 20 pairs in the 10 s since counting began: 2 per second, 80 left -> 40 s
    assert reading.left_s == 40.0 and reading.left_text == "about 40 s left"
    assert reading.elapsed_s == 15.0 and reading.count_text == "20 of 100 (20%)"
    assert reading.label == "screening 100 pairs (batch 256)"
    clock.t = 25.0  # no word for 10 s: a step that takes long slows the measured rate
    later = meter.reading("screen")
    assert later is not None and later.left_s == 80.0  # 20 pairs in 20 s: it never runs out


def test_an_upper_bound_says_at_most_and_a_time_budget_counts_seconds() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.update("trials", 0, 60)
    clock.t = 30.0
    trials = meter.update("trials", 1, 60)
    assert trials.left_text == "at most 29.5 min left"  # the loop stops on its own earlier
    tune = meter.update("tune:short training runs (--tune): 0 new, 0 pruned", 0, 180)
    clock.t = 75.0
    tune = meter.update("tune:short training runs (--tune): 3 new, 1 pruned", 45, 180)
    assert tune.count_text == "45 s of 3.0 min" and tune.left_text == "about 2.2 min left"


def test_a_stage_that_starts_again_measures_afresh() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.update("screen", 0, 10)
    clock.t = 10.0
    meter.update("screen", 10, 10)
    again = meter.update("screen", 0, 20)  # another study's screen
    assert again.left_s is None and again.elapsed_s == 0.0
    clock.t = 50.0
    meter.update("probe:probing fcn at batch 256", 0, 4)  # the screen waits for the probes
    clock.t = 90.0
    back = meter.update("screen", 0, 20)  # counting only now: its time starts now
    assert back.elapsed_s == 0.0 and back.left_s is None


def test_plain_lines_wait_a_few_seconds_then_speak_at_most_every_ten() -> None:
    clock, lines = Clock(), []  # type: ignore[var-annotated]
    plain = PlainLines(lines.append, clock)
    plain("screen", 0, 1000)
    clock.t = 2.0
    plain("screen", 100, 1000)
    assert lines == []  # a quick command prints no progress
    for i in range(1, 121):  # two minutes of reports, one every second
        clock.t = 2.0 + i
        plain("screen", 100 + 5 * i, 1000)
    assert 12 <= len(lines) <= 13  # one every 10 s, never a flood
    assert lines[0].startswith("[0:03] screening 1,000 machine x batch pairs")
    assert "about" in lines[-1] and lines[-1].endswith("left")
    clock.t = 125.0
    plain("tune:short training runs (--tune): 0 new, 0 pruned", 0, 180)
    assert lines[-1].startswith("[2:05] short training runs (--tune)")  # a new stage: at once
    assert lines[-1].endswith("estimating...")


def test_a_silent_step_is_repeated_by_the_timer() -> None:
    clock, lines = Clock(), []  # type: ignore[var-annotated]
    plain = PlainLines(lines.append, clock)
    plain("probe:probing gpt2 at batch 8 on this machine", 0, 1)
    for t in (5.0, 9.0, 16.0, 26.0):  # a timer ticks while one step takes long
        clock.t = t
        plain.tick()
    assert [line[:6] for line in lines] == ["[0:05]", "[0:16]", "[0:26]"]
    assert all("probing gpt2 at batch 8" in line for line in lines)


def test_the_screen_counts_what_takes_its_time_not_its_pairs() -> None:
    """GPT-2 Large: 10 of 1,468 pairs after 21 min read "about 22.90 h left" for a screen of
    half an hour; a pair's time is its per-GPU batch size's first forecast (its step traced)."""
    heard: list[tuple[str, int, int]] = []
    pairs = [(acc, n, b) for b in (256, 512) for acc, n in (("T4", 1), ("T4", 2), ("A100", 8))]
    pairs += [(None, 0, 256)]  # a CPU row: scaled from this machine's step, no trace
    told = ScreenProgress(lambda *a: heard.append(a), pairs)
    assert told.total == 5  # 256, 128, 32; then 512, 64 (512 on two GPUs is 256 again)
    for i, (_, _, batch) in enumerate(pairs):
        told.before(i, batch)
        told.after(i)
    told.before(len(pairs), None)
    assert heard[0] == (
        "screen:screening 7 machine x batch pairs, 0 done (batch 256: 1 of 2); per-GPU batch "
        "sizes forecast",
        0,
        5,
    )
    assert [done for _, done, _ in heard] == [0, 1, 2, 3, 4, 4, 5, 5]
    cpu_only = ScreenProgress(lambda *a: heard.append(a), [(None, 0, 256)] * 3)
    cpu_only.before(1, 256)
    assert heard[-1][1:] == (1, 3)  # without GPU rows: the pairs
