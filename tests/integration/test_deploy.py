"""The deployment recipes in deploy/, checked as far as this machine can: systemd units with
systemd-analyze, the Kubernetes manifests parsed and their daemon arguments run, the Slurm
prolog, task prolog and epilog run with the environment slurmd gives them.

The Slurm scripts run as root, for a job's user: the tests of what that user can and cannot make
root do run them as root (skipped otherwise) for the user nobody, with a stand-in for the daemon
(FAKE_JOADER), so they need no build."""
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from conftest import JOADER

DEPLOY = os.path.join(os.path.dirname(__file__), "..", "..", "deploy")
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the Slurm prolog and epilog run as root (setpriv, chown)")
NOBODY = 65534  # nobody:nogroup on Debian, the job's user in the tests below


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


def test_kubernetes_metrics_stay_in_the_pod_unless_exposed_on_purpose_and_pods_cannot_write_the_socket_dir():
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml"))))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    container = ds["spec"]["template"]["spec"]["containers"][0]
    metrics = [a.split("=", 1)[1] for a in container["args"] if a.startswith("--metrics=")]
    assert metrics == ["127.0.0.1:9464"]  # not 0.0.0.0: any pod of the cluster could read it
    # Nothing announces a port no one can scrape; the deliberate way out (--metrics=$(POD_IP):9464) has its variable.
    assert "prometheus.io/scrape" not in (ds["spec"]["template"]["metadata"].get("annotations") or {})
    assert not container.get("ports")
    pod_ip = next(e for e in container["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    daemon_mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert daemon_mounts["/data"].get("readOnly") is True
    train = next(d for d in docs if d["kind"] == "Pod")
    assert train["spec"]["securityContext"]["runAsNonRoot"] is True
    assert train["spec"]["securityContext"]["runAsUser"] not in (0, ds["spec"]["template"]["spec"]["securityContext"]["runAsUser"])
    train_container = train["spec"]["containers"][0]
    assert train_container["securityContext"]["allowPrivilegeEscalation"] is False
    train_mounts = {m["mountPath"]: m for m in train_container["volumeMounts"]}
    assert train_mounts["/run/joader"].get("readOnly") is True  # connect() needs no write access


def test_systemd_units_run_nothing_as_root_keep_metrics_on_the_loopback_and_confine_a_group():
    for unit in ("joader.service", "joader-user.service"):
        text = open(os.path.join(DEPLOY, "systemd", unit)).read().replace("\\\n", " ")
        # A root-run step (ExecStartPre=+..., PermissionsStartOnly, ...) could act on a path the users may write.
        assert not re.search(r"^Exec\w*=[-@:]*[+!]", text, re.M), unit
        assert not re.search(r"^(PermissionsStartOnly|User=root)", text, re.M), unit
        execs = re.findall(r"^Exec\w*=(.*)$", text, re.M)
        assert execs, unit
        hosts = []
        for line in execs:
            argv = shlex.split(line)
            hosts += [argv[i + 1] for i, a in enumerate(argv) if a == "--metrics"]
            hosts += [a.split("=", 1)[1] for a in argv if a.startswith("--metrics=")]
            if "--allow-group" in argv or any(a.startswith("--allow-group=") for a in argv):
                assert "--data-root" in argv or any(a.startswith("--data-root=") for a in argv), unit
        for address in hosts:  # PORT alone is the loopback too
            assert ":" not in address or address.rsplit(":", 1)[0] in ("127.0.0.1", "[::1]", "localhost"), (unit, address)
        if unit == "joader.service":
            assert hosts == ["127.0.0.1:9464"]


def test_kubernetes_daemonset_has_what_the_daemon_and_the_jobs_need_and_its_arguments_run(workdir):
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml"))))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]
    container = pod["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "serve" and "--socket=/run/joader/joader.sock" in args and "--metrics=127.0.0.1:9464" in args
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


@needs_root
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
    assert task == f"export JOADER_SOCKET={run_dir}/job-4242/sock/joader.sock"
    sock = task.split("=", 1)[1]
    assert os.stat(os.path.dirname(sock)).st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(run_dir, "job-4242")).st_mode & 0o777 == 0o755  # root's: the pid and the log
    subprocess.run([JOADER, "dataset", "add", "d", "--source", "synthetic:20:32x32", "--crop", "16"],
                   env=dict(os.environ, JOADER_SOCKET=sock), check=True, capture_output=True)
    pid = int(open(os.path.join(run_dir, "job-4242", "joader.pid")).read())
    arenas = [f for f in os.listdir("/dev/shm") if f.startswith(f"joader-{os.getuid()}-{pid}-")]
    assert arenas, "no arena for the job's daemon"
    r = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-epilog.sh")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(run_dir, "job-4242"))
    assert not alive(pid)  # gone, or a zombie where nothing reaps the orphans (a container's init)
    assert not any(os.path.exists(os.path.join("/dev/shm", a)) for a in arenas)  # a clean stop
    r = subprocess.run([os.path.join(DEPLOY, "slurm", "joader-epilog.sh")], env=env, capture_output=True, text=True)
    assert r.returncode == 0  # twice is harmless


# ---- the Slurm scripts, as root, for a job of nobody's: what the job's user can make root do ----

# A stand-in for `joader serve` and `joader status` (the scripts use nothing else): it refuses a
# socket directory that is not its user's and private, as the daemon does, and serves until SIGTERM.
FAKE_JOADER = """
import os, signal, socket, sys
args = sys.argv[1:]
sock = args[args.index("--socket") + 1]
if args[0] == "status":
    try:
        socket.socket(socket.AF_UNIX).connect(sock)
    except OSError as e:
        sys.exit(f"fake joader: {e}")
    sys.exit(0)
st = os.stat(os.path.dirname(sock))
if st.st_uid != os.getuid() or st.st_mode & 0o077:
    sys.exit("fake joader: the socket's directory must be mine and private")
os.umask(0o177)
s = socket.socket(socket.AF_UNIX)
s.bind(sock)
s.listen(16)
def stop(*_):
    os.unlink(sock)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(f"fake joader serving {sock} as uid {os.getuid()}", flush=True)
while True:
    s.accept()[0].close()
"""


def alive(pid):
    """Whether pid is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


def as_nobody(*cmd):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd],
                          capture_output=True, text=True, timeout=60)


class SlurmNode:
    """A root-owned folder other users may enter (0755, in /tmp) holding the fake daemon and the
    scripts' JOADER_RUN_DIR; runs the prolog, task prolog and epilog for job 4242 of nobody's."""

    def __init__(self, top):
        self.top = top
        self.run_dir = os.path.join(top, "run")
        self.job_dir = os.path.join(self.run_dir, "job-4242")
        self.joader = os.path.join(top, "joader")
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        with open(self.joader, "w") as f:
            f.write(f"#!{python} -I\n{FAKE_JOADER}")
        os.chmod(self.joader, 0o755)
        self.env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_JOB_UID=str(NOBODY), SLURM_JOB_GID=str(NOBODY),
                        SLURM_JOB_USER="nobody", JOADER=self.joader, JOADER_RUN_DIR=self.run_dir,
                        JOADER_CACHE_SIZE="16MiB")

    def run(self, script):
        return subprocess.run([os.path.join(DEPLOY, "slurm", f"joader-{script}.sh")], env=self.env,
                              capture_output=True, text=True, timeout=60)

    def daemon_pid(self):
        return int(open(os.path.join(self.job_dir, "joader.pid")).read())


@pytest.fixture
def node():
    top = tempfile.mkdtemp(prefix="joader-slurm-")
    os.chmod(top, 0o755)
    n = SlurmNode(top)
    yield n
    # A daemon a test left running (one the epilog was right not to stop) is stopped here.
    r = subprocess.run(["pgrep", "-u", str(NOBODY), "-f", f"{n.joader} serve"], capture_output=True, text=True)
    for pid in r.stdout.split():
        os.kill(int(pid), signal.SIGKILL)
    shutil.rmtree(top, ignore_errors=True)


@needs_root
def test_slurm_prolog_keeps_roots_files_in_a_folder_only_root_may_write_and_the_socket_in_the_users(node):
    r = node.run("prolog")
    assert r.returncode == 0, r.stderr
    job = os.lstat(node.job_dir)
    assert stat.S_ISDIR(job.st_mode) and (job.st_uid, job.st_gid, job.st_mode & 0o7777) == (0, 0, 0o755)
    pid_file = os.lstat(os.path.join(node.job_dir, "joader.pid"))
    assert stat.S_ISREG(pid_file.st_mode) and pid_file.st_uid == 0 and not pid_file.st_mode & 0o022
    log = os.lstat(os.path.join(node.job_dir, "joader.log"))  # the user's to read, nobody else's
    assert stat.S_ISREG(log.st_mode) and log.st_uid == NOBODY and log.st_mode & 0o777 == 0o600
    assert "fake joader serving" in open(os.path.join(node.job_dir, "joader.log")).read()
    sock_dir = os.lstat(os.path.join(node.job_dir, "sock"))
    assert stat.S_ISDIR(sock_dir.st_mode) and sock_dir.st_uid == NOBODY and sock_dir.st_mode & 0o777 == 0o700
    pid = node.daemon_pid()
    uids = next(line for line in open(f"/proc/{pid}/status") if line.startswith("Uid:")).split()[1:]
    assert uids == [str(NOBODY)] * 4  # the daemon runs as the job's user
    task = node.run("taskprolog").stdout.strip()
    assert task == f"export JOADER_SOCKET={node.job_dir}/sock/joader.sock"
    assert stat.S_ISSOCK(os.stat(task.split("=", 1)[1]).st_mode)
    # The user can plant nothing where root writes: no link, no file, no rename, no removal.
    victim = os.path.join(node.top, "victim")
    open(victim, "w").write("root's\n")
    for cmd in (["ln", "-sf", victim, os.path.join(node.job_dir, "joader.log")],
                ["ln", "-sf", victim, os.path.join(node.job_dir, "joader.pid")],
                ["ln", "-s", victim, os.path.join(node.job_dir, "joader.new")],
                ["rm", "-f", os.path.join(node.job_dir, "joader.pid")],
                ["mv", os.path.join(node.job_dir, "sock"), os.path.join(node.job_dir, "sock2")]):
        r = as_nobody(*cmd)
        assert r.returncode != 0 and "Permission denied" in r.stderr, (cmd, r.stderr)
    assert sorted(os.listdir(node.job_dir)) == ["joader.log", "joader.pid", "sock"]
    assert not os.path.islink(os.path.join(node.job_dir, "joader.log")) and node.daemon_pid() == pid
    r = node.run("epilog")
    assert r.returncode == 0, r.stderr
    assert not os.path.lexists(node.job_dir) and not alive(pid)
    assert open(victim).read() == "root's\n"


@needs_root
@pytest.mark.parametrize("leftover", ["the user's folder", "a symlink to a folder", "a dangling symlink"])
def test_slurm_prolog_refuses_a_job_folder_that_already_exists_and_writes_nothing_through_it(node, leftover):
    os.mkdir(node.run_dir, 0o755)
    elsewhere = os.path.join(node.top, "elsewhere")
    os.mkdir(elsewhere, 0o755)
    if leftover == "the user's folder":  # as the recipe made it before: the job's user's, 0700
        os.mkdir(node.job_dir, 0o700)
        os.chown(node.job_dir, NOBODY, NOBODY)
        elsewhere = node.job_dir
    elif leftover == "a symlink to a folder":
        os.symlink(elsewhere, node.job_dir)
    else:
        os.symlink(os.path.join(elsewhere, "gone"), node.job_dir)
    r = node.run("prolog")
    assert r.returncode != 0 and "already exists" in r.stderr, r.stderr
    assert os.listdir(elsewhere) == []  # no pid, log nor socket folder written through it
    assert subprocess.run(["pgrep", "-f", f"{node.joader} serve"], capture_output=True).returncode == 1


@needs_root
@pytest.mark.parametrize("run_dir", ["writable by others", "the user's", "a symlink", "in a folder others may write"])
def test_slurm_prolog_refuses_a_run_dir_another_user_could_swap(node, run_dir):
    if run_dir == "writable by others":
        os.mkdir(node.run_dir, 0o755)
        os.chmod(node.run_dir, 0o1777)  # even sticky: the user could make job-4242 first
    elif run_dir == "the user's":
        os.mkdir(node.run_dir, 0o755)
        os.chown(node.run_dir, NOBODY, NOBODY)
    elif run_dir == "a symlink":
        os.mkdir(os.path.join(node.top, "real"), 0o755)
        os.symlink(os.path.join(node.top, "real"), node.run_dir)
    else:
        shared = os.path.join(node.top, "shared")
        os.mkdir(shared, 0o755)
        os.chmod(shared, 0o777)  # not sticky: another user could rename run/ and put theirs in its place
        node.run_dir = node.env["JOADER_RUN_DIR"] = os.path.join(shared, "run")
        node.job_dir = os.path.join(node.run_dir, "job-4242")
    r = node.run("prolog")
    assert r.returncode != 0 and "joader-prolog:" in r.stderr, r.stderr
    assert not os.path.lexists(node.job_dir) and not os.path.lexists(os.path.join(node.top, "real", "job-4242"))
    # Nor does the epilog touch anything there: what a user put in such a folder stays.
    if os.path.isdir(node.run_dir):
        planted = os.path.join(node.run_dir, "job-4242")
        os.mkdir(planted)
        open(os.path.join(planted, "keep"), "w").close()
        r = node.run("epilog")
        assert r.returncode != 0 and "nothing removed" in r.stderr, r.stderr
        assert os.path.exists(os.path.join(planted, "keep"))


@needs_root
@pytest.mark.parametrize("variable, value", [("SLURM_JOB_ID", "1/../../x"), ("SLURM_JOB_UID", "0 --help"),
                                             ("SLURM_JOB_GID", "-1")])
def test_slurm_prolog_and_epilog_refuse_a_job_id_uid_or_gid_that_is_not_a_number(node, variable, value):
    node.env[variable] = value
    for script in ("prolog", "epilog"):
        r = node.run(script)
        assert r.returncode != 0 and f"{variable} must be a number" in r.stderr, (script, r.stderr)
    assert not os.path.lexists(node.run_dir)  # refused before anything is made


@needs_root
def test_slurm_epilog_ignores_pids_and_links_the_user_plants_and_stops_only_the_daemon(node):
    r = node.run("prolog")
    assert r.returncode == 0, r.stderr
    daemon = node.daemon_pid()
    root_sleep = subprocess.Popen(["sleep", "1000"])
    victim_dir = os.path.join(node.top, "victim")
    os.mkdir(victim_dir, 0o755)
    open(os.path.join(victim_dir, "keep"), "w").write("root's\n")
    try:
        # Everything the user can write: their socket folder. Root's sleep named in every way the
        # old recipe would have read it, and links to a root folder for the epilog's rm -rf.
        sock_dir = os.path.join(node.job_dir, "sock")
        script = (f"echo {root_sleep.pid} >{sock_dir}/joader.pid && echo {root_sleep.pid} >{node.job_dir}/joader.log && "
                  f"ln -s {victim_dir} {sock_dir}/link && ln -s {victim_dir}/keep {sock_dir}/keep && ln -s / {sock_dir}/root")
        r = as_nobody("sh", "-c", script)
        assert r.returncode == 0, r.stderr
        r = node.run("epilog")
        assert r.returncode == 0, r.stderr
        assert alive(root_sleep.pid), "the epilog killed a process the user named"
        assert not alive(daemon) and not os.path.lexists(node.job_dir)
        assert os.listdir(victim_dir) == ["keep"] and open(os.path.join(victim_dir, "keep")).read() == "root's\n"
    finally:
        root_sleep.kill()
        root_sleep.wait()


@needs_root
def test_slurm_epilog_reads_nothing_in_a_job_folder_that_is_not_roots_and_removes_it_without_following_links(node):
    # The older recipe's folder, the job's user's: its pid file names root's process, its log is a link.
    os.mkdir(node.run_dir, 0o755)
    os.mkdir(node.job_dir, 0o700)
    victim = os.path.join(node.top, "victim")
    open(victim, "w").write("root's\n")
    root_sleep = subprocess.Popen(["sleep", "1000"])
    try:
        os.chown(node.job_dir, NOBODY, NOBODY)
        r = as_nobody("sh", "-c", f"echo {root_sleep.pid} >{node.job_dir}/joader.pid && ln -s {victim} {node.job_dir}/joader.log")
        assert r.returncode == 0, r.stderr
        r = node.run("epilog")
        assert r.returncode == 0 and "nothing in it read" in r.stderr, r.stderr
        assert alive(root_sleep.pid) and open(victim).read() == "root's\n"
        assert not os.path.lexists(node.job_dir)
    finally:
        root_sleep.kill()
        root_sleep.wait()


@needs_root
@pytest.mark.parametrize("named", ["a process of root's", "another process of the user's"])
def test_slurm_epilog_signals_no_process_but_the_jobs_daemon_even_if_the_pid_file_names_it(node, named):
    # As if the daemon had died and its PID been reused: the pid file, root's, names another process.
    r = node.run("prolog")
    assert r.returncode == 0, r.stderr
    daemon = node.daemon_pid()
    cmd = ["sleep", "1000"] if named == "a process of root's" else \
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sleep", "1000"]
    other = subprocess.Popen(cmd)
    try:
        deadline = time.monotonic() + 10
        while open(f"/proc/{other.pid}/cmdline").read().split("\0")[0] != "sleep":  # setpriv has exec'd
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with open(os.path.join(node.job_dir, "joader.pid"), "w") as f:
            f.write(f"{other.pid}\n")
        r = node.run("epilog")
        assert r.returncode == 0, r.stderr
        assert alive(other.pid), "the epilog signalled a process that is not the job's daemon"
        assert not os.path.lexists(node.job_dir)
        assert alive(daemon)  # not named, so not stopped (the fixture stops it)
    finally:
        other.kill()
        other.wait()
