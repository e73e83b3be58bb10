# SPDX-License-Identifier: MIT
"""own_stats(NAME): this process's counters as smcr-stat publishes them, into
$STATS_DIR/stats.NAME.PID (empty when smcr is not loaded here), for tests whose
processes' stats files vanish when they exit."""
import os
import subprocess


def own_stats(name):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([os.environ["SMCR_STAT"], "stats", "--json", "-p", str(os.getpid()),
                          "--dir", os.environ["XDG_RUNTIME_DIR"] + "/smcr"],
                         env=env, capture_output=True, text=True).stdout
    with open(f"{os.environ['STATS_DIR']}/stats.{name}.{os.getpid()}", "w") as f:
        f.write(out)
