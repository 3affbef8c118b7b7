"""The deployment recipes in deploy/, checked as far as this machine can: systemd units with
systemd-analyze, the Kubernetes manifests parsed and their daemon arguments run, the Slurm
prolog, task prolog and epilog run with the environment slurmd gives them."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import yaml

from conftest import JOADER

DEPLOY = os.path.join(os.path.dirname(__file__), "..", "..", "deploy")


@pytest.mark.parametrize("unit", ["joader.service", "joader-user.service"])
def test_systemd_units_verify(workdir, unit):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    text = open(os.path.join(DEPLOY, "systemd", unit)).read()
    exec_start = re.search(r"^ExecStart=(\S+) serve", text, re.M)
    assert exec_start and "SIGTERM" in text and "Restart=on-failure" in text
    copy = os.path.join(workdir, unit)
    open(copy, "w").write(text.replace(exec_start.group(1), os.path.abspath(JOADER)))  # the binary must exist
    r = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if unit == "joader.service":
        for needed in ("RuntimeDirectory=joader", "RuntimeDirectoryMode=0750", "--socket /run/joader/joader.sock",
                       "--allow-group ml", "Group=ml", "--data-root", "/dev/shm"):
            assert needed in text, needed


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kubernetes_daemonset_has_what_the_daemon_and_the_jobs_need_and_its_arguments_run(workdir):
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml"))))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == "9464"
    container = pod["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "serve" and "--socket=/run/joader/joader.sock" in args and "--metrics=0.0.0.0:9464" in args
    assert {"containerPort": 9464, "name": "metrics"} in container["ports"]
    assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]["cpu"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts["/dev/shm"]]["hostPath"]["path"] == "/dev/shm"   # the arena, shared with the jobs
    assert volumes[mounts["/run/joader"]]["hostPath"]["path"] == "/run/joader"
    assert "chown 2000:2000 /run/joader" in pod["spec"]["initContainers"][0]["command"][-1]
    train = next(d for d in docs if d["kind"] == "Pod")
    assert 2000 in train["spec"]["securityContext"]["supplementalGroups"]
    env = {e["name"]: e["value"] for e in train["spec"]["containers"][0]["env"]}
    assert env["JOADER_SOCKET"] == "/run/joader/joader.sock"
    train_mounts = {m["mountPath"] for m in train["spec"]["containers"][0]["volumeMounts"]}
    assert {"/dev/shm", "/run/joader"} <= train_mounts
    # The daemon's arguments, with this machine's paths, group and a free port, start a daemon.
    sock_dir = os.path.join(workdir, "run")
    os.mkdir(sock_dir, 0o750)
    local = {"--socket": os.path.join(sock_dir, "joader.sock"), "--cache-size": "16MiB",
             "--allow-group": str(os.getgid()), "--data-root": workdir,
             "--state": os.path.join(sock_dir, "datasets.json"), "--metrics": f"127.0.0.1:{free_port()}"}
    argv = [JOADER, "serve"] + [f"{a.split('=')[0]}={local[a.split('=')[0]]}" for a in args[1:]]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while subprocess.run([JOADER, "status", "--socket", local["--socket"]], capture_output=True).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_slurm_prolog_starts_a_daemon_per_job_that_the_tasks_find_and_the_epilog_stops_it(workdir):
    run_dir = os.path.join(workdir, "slurm")
    env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_JOB_UID=str(os.getuid()), SLURM_JOB_GID=str(os.getgid()),
               SLURM_JOB_USER="trainer", SLURM_JOB_NODELIST="node1", JOADER=os.path.abspath(JOADER),
               JOADER_RUN_DIR=run_dir, JOADER_CACHE_SIZE="16MiB")
    r = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-prolog.sh")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    task = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-taskprolog.sh")], env=env, capture_output=True,
                          text=True).stdout.strip()
    assert task == f"export JOADER_SOCKET={run_dir}/job-4242/joader.sock"
    sock = task.split("=", 1)[1]
    assert os.stat(os.path.dirname(sock)).st_mode & 0o777 == 0o700
    subprocess.run([JOADER, "dataset", "add", "d", "--source", "synthetic:20:32x32", "--crop", "16"],
                   env=dict(os.environ, JOADER_SOCKET=sock), check=True, capture_output=True)
    pid = int(open(os.path.join(run_dir, "job-4242", "joader.pid")).read())
    arenas = [f for f in os.listdir("/dev/shm") if f.startswith(f"joader-{os.getuid()}-{pid}-")]
    assert arenas, "no arena for the job's daemon"
    r = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-epilog.sh")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(run_dir, "job-4242"))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not any(os.path.exists(os.path.join("/dev/shm", a)) for a in arenas)  # a clean stop
    r = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-epilog.sh")], env=env, capture_output=True, text=True)
    assert r.returncode == 0  # twice is harmless
