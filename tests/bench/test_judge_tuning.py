"""bench.judge_tuning reads MetaSchedule's scheduler log: time to pick candidates, and to pick none."""
from __future__ import annotations

from bench.judge_tuning import picking_seconds

LOG = """\
2026-12-06 00:00:00 [INFO] [task_scheduler.cc:174] Initializing Task #0: "matmul"
2026-12-06 00:00:01 [INFO] [task_scheduler.cc:195] TaskScheduler picks Task #0: "matmul"
2026-12-06 00:00:11 [INFO] [task_scheduler.cc:208] Sending 64 sample(s) to builder
2026-12-06 00:00:15 [INFO] [task_scheduler.cc:218] Sending 64 valid sample(s) to runner
2026-12-06 00:00:20 [INFO] [task_scheduler.cc:195] TaskScheduler picks Task #1: "relu"
2026-12-06 00:00:27 [INFO] [task_scheduler.cc:208] Sending 0 sample(s) to builder
2026-12-06 00:00:27 [INFO] [task_scheduler.cc:218] Sending 0 valid sample(s) to runner
2026-12-06 00:00:28 [INFO] [task_scheduler.cc:195] TaskScheduler picks Task #0: "matmul"
2026-12-06 00:00:28 [INFO] [task_scheduler.cc:195] TaskScheduler picks Task #1: "relu"
"""


def test_picking_seconds_counts_each_pick_up_to_its_batch_and_the_empty_ones_apart(tmp_path):
    path = tmp_path / "task_scheduler.log"
    path.write_text(LOG)
    assert picking_seconds(path) == {"picking_s": 17.0, "empty_batches_s": 7.0}
