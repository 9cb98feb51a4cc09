"""What the CPU benchmarks that time whole processes share: a timed run with its peak memory, and a
throwaway QGIS profile with the plugin enabled for qgis_process."""
import os
import shutil
import subprocess
import sys
import time


def timed(command, env=None):
    """Wall time (s), peak resident memory (MB), stdout and stderr of a whole process; exits on failure.
    The files written so far are flushed first (not timed): otherwise the kernel writes back the last
    run's outputs (tens of megabytes) while this one runs, and on a 2-core machine that takes a core
    from whichever program comes next."""
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "PEAK_KB %M"] + command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    peak = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK_KB")][-1]
    return wall, peak / 1024, done.stdout, done.stderr


def qgis_environment(tmp, plugin_dir):
    """The environment of a qgis_process run with a profile in `tmp` where the plugin is enabled."""
    profile = os.path.join(tmp, "profile")
    plugins = os.path.join(profile, "profiles", "default", "python", "plugins")
    os.makedirs(plugins)
    shutil.copytree(plugin_dir, os.path.join(plugins, "gpugeo"))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QGIS_CUSTOM_CONFIG_PATH=profile, XDG_RUNTIME_DIR=tmp)
    subprocess.run(["/usr/bin/qgis_process.bin", "plugins", "enable", "gpugeo"], env=env, capture_output=True,
                   check=True)
    return env
