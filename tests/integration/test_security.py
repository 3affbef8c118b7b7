"""Who may use the daemon, which files it may read, and what it does with hostile requests.

Tests that switch users or drop capabilities need root (CI runs as root) and are skipped otherwise;
a plain user's run covers the rest, and unreadable files use chmod 000 directly.
"""
import grp
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import CLIENT, JOADER, Daemon, make_images, received
from test_daemon import add_synthetic, client_error, expect_exact_epochs

RAW_CLIENT = os.environ.get("JOADER_RAW_CLIENT", "build/joader_raw_client")
NOBODY = 65534  # nobody:nogroup on Debian
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching users needs root")

# root reads every file whatever its mode; without these two capabilities, modes apply to it too.
NO_DAC = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")


@pytest.fixture
def public_dir():
    """A directory other users can enter, with copies of the binaries they will run."""
    d = tempfile.mkdtemp(prefix="joader-shared-")
    os.chmod(d, 0o755)
    for b in (JOADER, CLIENT):
        shutil.copy(b, d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(*cmd, group=NOBODY):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={group}", "--clear-groups", *cmd],
                          capture_output=True, text=True, timeout=60)


def open_daemon(public_dir):
    """A daemon of root's whose socket anyone may connect to (0666, a misconfiguration): its uid
    check is the only wall left."""
    sock_dir = os.path.join(public_dir, "sock")
    os.mkdir(sock_dir, 0o755)
    daemon = Daemon(sock_dir)
    os.chmod(daemon.socket, 0o666)
    return daemon


def group_daemon(public_dir):
    """A daemon of root's shared with nobody's group (--allow-group), confined to public_dir."""
    sock_dir = os.path.join(public_dir, "sock")
    os.mkdir(sock_dir, 0o750)
    os.chown(sock_dir, -1, NOBODY)
    return Daemon(sock_dir, extra=("--allow-group", grp.getgrgid(NOBODY).gr_name, "--data-root", public_dir))


def raw(daemon, mode, *args):
    r = subprocess.run([RAW_CLIENT, daemon.socket, mode, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    *lines, last = r.stdout.strip().splitlines()
    code, _, message = last.partition(" ")
    return int(code), message, lines


# ---- who may connect ----

@needs_root
def test_another_user_is_refused_by_uid_even_when_the_socket_is_open_to_everyone(public_dir):
    daemon = open_daemon(public_dir)
    try:
        add_synthetic(daemon)
        joader, client = (os.path.join(public_dir, os.path.basename(b)) for b in (JOADER, CLIENT))
        r = as_nobody(joader, "status", "--socket", daemon.socket)
        assert r.returncode != 0
        assert f"uid {NOBODY}" in r.stderr and "may not use this Joader daemon, which belongs to uid 0" in r.stderr, r.stderr
        r = as_nobody(client, "--socket", daemon.socket, "--dataset", "synth", "--batch", "4")
        assert r.returncode == 3 and "error 7:" in r.stderr and "may not use" in r.stderr, r.stderr  # PERMISSION_DENIED
        assert daemon.status()["jobs"] == []  # the owner is still served
    finally:
        daemon.stop()


@needs_root
def test_another_user_behind_a_private_directory_is_told_permission_denied_not_no_daemon(public_dir):
    sock_dir = os.path.join(public_dir, "private")
    os.mkdir(sock_dir, 0o700)
    daemon = Daemon(sock_dir)
    try:
        joader = os.path.join(public_dir, os.path.basename(JOADER))
        r = as_nobody(joader, "status", "--socket", daemon.socket)
        assert r.returncode != 0 and "permission denied" in r.stderr and f"uid {NOBODY}" in r.stderr, r.stderr
        assert "no Joader daemon" not in r.stderr, r.stderr
    finally:
        daemon.stop()


# ---- which daemon a client trusts ----

# A bare listener that is not a Joader daemon: it counts the connections and bytes it is sent,
# reporting them in a JSON file after every change. argv: socket, report, uid to become before
# listen() (-1: stay), directory to create first ("" for none).
LISTENER = r"""
import json, os, socket, sys
path, report, uid, make_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if make_dir:
    os.mkdir(make_dir, 0o755)
    os.chmod(make_dir, 0o755)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o666)
if uid >= 0:
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
s.listen(16)
seen = {"connections": 0, "bytes": 0}
def tell():
    with open(report + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(report + ".tmp", report)
tell()
while True:
    c, _ = s.accept()
    seen["connections"] += 1
    tell()
    c.settimeout(2.0)
    try:
        while (d := c.recv(65536)):
            seen["bytes"] += len(d)
            tell()
    except OSError:
        pass
    c.close()
"""


class Listener:
    def __init__(self, socket_path, report_dir, uid=-1, make_dir="", run_as=()):
        self.report = os.path.join(report_dir, "listener.json")
        self.proc = subprocess.Popen([*run_as, "/usr/bin/python3", "-c", LISTENER, socket_path, self.report, str(uid),
                                      make_dir], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.report):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.proc.stderr.read()
            time.sleep(0.02)

    def seen(self):
        with open(self.report) as f:
            return json.load(f)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def plain_env(**extra):
    """The environment of a user who set nothing: the default socket path applies."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOADER_SOCKET", "XDG_RUNTIME_DIR", "JOADER_TRUST_USERS")}
    env.update(extra)
    return env


SQUATTER = 65533  # a uid without a name: another user of the machine


def open_reports(public_dir):
    """A folder where a listener running as another user may write its report."""
    reports = os.path.join(public_dir, "reports")
    os.mkdir(reports)
    os.chmod(reports, 0o777)
    return reports


@needs_root
def test_a_socket_directory_another_user_made_first_gets_not_one_byte_from_the_client(public_dir):
    victim_dir = f"/tmp/joader-{NOBODY}"
    if os.path.lexists(victim_dir):
        pytest.skip(f"{victim_dir} exists on this machine: the test needs to create it as another user")
    listener = Listener(os.path.join(victim_dir, "joader.sock"), open_reports(public_dir), make_dir=victim_dir,
                        run_as=("setpriv", f"--reuid={SQUATTER}", f"--regid={SQUATTER}", "--clear-groups"))
    try:
        joader = os.path.join(public_dir, os.path.basename(JOADER))
        r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", joader, "status"],
                           capture_output=True, text=True, timeout=60, env=plain_env())
        assert r.returncode != 0
        assert f"its directory {victim_dir} belongs to uid {SQUATTER}" in r.stderr, r.stderr
        assert f"JOADER_TRUST_USERS={SQUATTER}" in r.stderr, r.stderr  # the way to mean it
        assert listener.seen() == {"connections": 0, "bytes": 0}
        # The victim's own daemon refuses the squatted directory too, naming its owner.
        r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", joader, "serve"],
                           capture_output=True, text=True, timeout=60, env=plain_env())
        assert r.returncode != 0 and f"belongs to uid {SQUATTER}" in r.stderr, r.stderr
    finally:
        listener.stop()
        shutil.rmtree(victim_dir, ignore_errors=True)


@needs_root
def test_a_listener_running_as_another_user_gets_not_one_byte_unless_that_user_is_trusted(public_dir):
    sock = os.path.join(public_dir, "j.sock")  # a directory of root's: only the listener's uid is wrong
    listener = Listener(sock, open_reports(public_dir), uid=SQUATTER)
    try:
        r = subprocess.run([JOADER, "status", "--socket", sock], capture_output=True, text=True, timeout=60,
                           env=plain_env())
        assert r.returncode != 0
        assert f"runs as uid {SQUATTER}, not as root (uid 0)" in r.stderr, r.stderr
        assert listener.seen()["bytes"] == 0  # one connection, to read who listens, and nothing sent
        # Trusting that user on purpose lets the client talk to it (this listener answers no gRPC).
        r = subprocess.run([JOADER, "status", "--socket", sock], capture_output=True, text=True, timeout=60,
                           env=plain_env(JOADER_TRUST_USERS=str(SQUATTER)))
        assert r.returncode != 0 and "refusing" not in r.stderr, r.stderr
        assert listener.seen()["bytes"] > 0
    finally:
        listener.stop()


def test_a_socket_in_a_directory_others_may_write_gets_not_one_byte(workdir):
    shared = os.path.join(workdir, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)  # not sticky: anyone may replace the socket
    sock = os.path.join(shared, "j.sock")
    listener = Listener(sock, workdir)
    try:
        r = subprocess.run([JOADER, "status", "--socket", sock], capture_output=True, text=True, timeout=60,
                           env=plain_env())
        assert r.returncode != 0
        assert f"its directory {shared} (mode 0777" in r.stderr and "may be written by other users" in r.stderr, r.stderr
        assert listener.seen() == {"connections": 0, "bytes": 0}
    finally:
        listener.stop()


@needs_root
def test_allow_group_lets_its_members_run_jobs_and_read_the_arena(public_dir):
    daemon = group_daemon(public_dir)
    try:
        add_synthetic(daemon)
        st = os.stat(daemon.socket)
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == NOBODY
        arenas = [os.stat(p) for p in (os.path.join("/dev/shm", n) for n in os.listdir("/dev/shm"))
                  if os.path.basename(p).startswith(f"joader-0-{daemon.proc.pid}-")]
        assert arenas and all(stat.S_IMODE(a.st_mode) == 0o640 and a.st_gid == NOBODY for a in arenas)
        client = os.path.join(public_dir, os.path.basename(CLIENT))
        r = as_nobody(client, "--socket", daemon.socket, "--dataset", "synth", "--ids", "0:40", "--batch", "8")
        assert r.returncode == 0, r.stderr
        ids = sorted(int(line.split()[1]) for line in r.stdout.splitlines())
        assert ids == list(range(40))
    finally:
        daemon.stop()


def test_a_group_that_does_not_exist_is_refused_at_start(workdir):
    r = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "s.sock"), "--allow-group", "no-such-group-x"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown group 'no-such-group-x'" in r.stderr, r.stderr


HOLD_CONNECTIONS = r"""
import socket, sys, time
conns = []
for _ in range(20):
    c = socket.socket(socket.AF_UNIX)
    c.connect(sys.argv[1])
    c.setblocking(False)
    conns.append(c)
def closed(c):  # read what the server sent (its HTTP/2 preface) up to end of file or nothing more yet
    try:
        while True:
            if c.recv(65536) == b"":
                return True
    except BlockingIOError:
        return False
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    n = sum(closed(c) for c in conns)
    if n >= 12:
        break
    time.sleep(0.1)
time.sleep(0.5)
print(sum(closed(c) for c in conns))
"""


@needs_root
def test_a_refused_user_cannot_hold_many_connections_open(public_dir):
    daemon = open_daemon(public_dir)
    try:
        r = as_nobody("/usr/bin/python3", "-c", HOLD_CONNECTIONS, daemon.socket)
        assert r.returncode == 0, r.stderr
        assert int(r.stdout) == 20 - 8, "all but 8 closed at once"
        assert daemon.status()["jobs"] == []  # the owner is still served
    finally:
        daemon.stop()


def test_a_group_daemon_needs_a_data_root_unless_told_that_members_may_read_any_file(workdir):
    group = str(os.getgid())
    r = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "s.sock"), "--allow-group", group],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--allow-group needs --data-root" in r.stderr, r.stderr
    Daemon(workdir, extra=("--allow-group", group, "--group-reads-any-file")).stop()


def wait_for_job(daemon, name, timeout=30):
    deadline = time.monotonic() + timeout
    while not any(j["name"] == name for j in daemon.status()["jobs"]):
        assert time.monotonic() < deadline, f"job {name} never registered"
        time.sleep(0.05)


@needs_root
def test_a_member_of_the_group_cannot_end_or_remove_what_another_user_made(public_dir):
    daemon = group_daemon(public_dir)
    joader = os.path.join(public_dir, os.path.basename(JOADER))
    holder = None
    try:
        add_synthetic(daemon)  # root's
        holder = daemon.client("synth", "--name", "roots-job", "--batch", "4", "--epochs", "100", "--delay-ms", "100")
        wait_for_job(daemon, "roots-job")
        r = as_nobody(joader, "job", "rm", "roots-job", "--socket", daemon.socket)
        assert r.returncode != 0 and "job 'roots-job' belongs to uid 0" in r.stderr, r.stderr
        r = as_nobody(joader, "dataset", "rm", "synth", "--socket", daemon.socket)
        assert r.returncode != 0 and "dataset 'synth' belongs to uid 0" in r.stderr, r.stderr
        assert holder.poll() is None, "root's job lives on"
        # What a member made is its own to remove; and every member may use every dataset.
        r = as_nobody(joader, "dataset", "add", "mine", "--source", "synthetic:20:16x16", "--crop", "8",
                      "--socket", daemon.socket)
        assert r.returncode == 0, r.stderr
        owners = {d["name"]: d["owner_uid"] for d in daemon.status()["datasets"]}
        assert owners == {"synth": 0, "mine": NOBODY}
        r = as_nobody(joader, "dataset", "rm", "mine", "--socket", daemon.socket)
        assert r.returncode == 0, r.stderr
        # A member's job is the member's: its stream carries the member's uid, and the member may end it.
        client = os.path.join(public_dir, os.path.basename(CLIENT))
        member = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", client,
                                   "--socket", daemon.socket, "--dataset", "synth", "--name", "members-job",
                                   "--batch", "4", "--epochs", "100", "--delay-ms", "100"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_job(daemon, "members-job")
            owner = {j["name"]: j["owner_uid"] for j in daemon.status()["jobs"]}
            assert owner == {"roots-job": 0, "members-job": NOBODY}
            r = as_nobody(joader, "job", "rm", "members-job", "--socket", daemon.socket)
            assert r.returncode == 0, r.stderr
            assert member.wait(timeout=30) != 0
        finally:
            if member.poll() is None:
                member.kill()
        daemon.cli("job", "rm", "roots-job")  # the owner may
        assert holder.wait(timeout=30) != 0
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        daemon.stop()


def test_a_state_file_in_a_folder_others_may_write_is_refused_at_start(workdir):
    shared = os.path.join(workdir, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)  # not sticky: anyone could swap the list between the daemon's check and its use
    r = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "s.sock"), "--state",
                        os.path.join(shared, "list.json")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"--state: the folder {shared} of the dataset list" in r.stderr, r.stderr


def test_the_state_file_is_the_daemons_own_and_a_planted_link_is_not_followed(workdir):
    victim = os.path.join(workdir, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    state = os.path.join(workdir, "state.json")
    os.symlink(victim, state)
    daemon = Daemon(workdir, extra=("--state", state))
    try:
        add_synthetic(daemon)
        assert open(victim).read() == "precious"
        st = os.lstat(state)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert f"{state} is a symbolic link: not read" in daemon.output()
    finally:
        daemon.stop()
    restarted = Daemon(workdir, extra=("--state", state))
    try:
        assert [d["name"] for d in restarted.status()["datasets"]] == ["synth"], restarted.output()
    finally:
        restarted.stop()


def test_a_damaged_state_file_is_moved_aside_not_overwritten(workdir):
    state = os.path.join(workdir, "state.json")
    damaged = '{"version": 1, "datasets": [{"name": "tra'
    with open(state, "w") as f:
        f.write(damaged)
    daemon = Daemon(workdir, extra=("--state", state))
    try:
        add_synthetic(daemon)
        kept = [n for n in os.listdir(workdir) if n.startswith("state.json.bad-")]
        assert len(kept) == 1 and open(os.path.join(workdir, kept[0])).read() == damaged
        assert f"moved to {os.path.join(workdir, kept[0])}" in daemon.output()
        assert json.load(open(state))["datasets"][0]["name"] == "synth"
    finally:
        daemon.stop()


# ---- which files it may read ----

def unreadable_daemon(daemon_factory, **kwargs):
    return daemon_factory(prefix=NO_DAC if ROOT else (), **kwargs)


def test_an_unreadable_file_fails_the_job_naming_it_or_is_skipped(daemon_factory, workdir):
    daemon = unreadable_daemon(daemon_factory)
    root = os.path.join(workdir, "images")
    make_images(root)
    locked = os.path.join(root, "class1", "img_0000.jpg")  # item 10
    os.chmod(locked, 0)
    daemon.cli("dataset", "add", "imgs", "--source", f"imagefolder:{root}", "--crop", "32")
    daemon.cli("dataset", "add", "skipping", "--source", f"imagefolder:{root}", "--crop", "32", "--on-error", "skip")
    err = client_error(daemon, "imgs", "--ids", "8:12", "--batch", "4")
    assert f"item 10 ({locked}): cannot open: Permission denied" in err, err
    code, epochs, err = received(daemon.client("skipping", "--batch", "4", "--epochs", "2"))
    assert code == 0, err
    expect_exact_epochs(epochs, [i for i in range(30) if i != 10], 2)
    assert daemon.status()["skipped"] == 1  # the file, counted once (it was skipped in both epochs)


def test_an_unlistable_folder_inside_an_imagefolder_is_refused_not_left_out(daemon_factory, workdir):
    daemon = unreadable_daemon(daemon_factory)
    root = os.path.join(workdir, "images")
    make_images(root)
    hidden = os.path.join(root, "class2", "more")
    os.mkdir(hidden)
    shutil.copy(os.path.join(root, "class2", "img_0000.jpg"), hidden)
    os.chmod(hidden, 0)
    r = daemon.cli("dataset", "add", "imgs", "--source", f"imagefolder:{root}", "--crop", "32", check=False)
    assert r.returncode == 1 and f"cannot list {hidden}: Permission denied" in r.stderr, r.stderr
    assert daemon.status()["datasets"] == []


def test_a_data_root_confines_every_source_and_listed_file(daemon_factory, workdir):
    inside, outside = os.path.join(workdir, "data"), os.path.join(workdir, "elsewhere")
    make_images(os.path.join(inside, "train"))
    make_images(outside)
    daemon = daemon_factory(extra=("--data-root", inside))
    daemon.cli("dataset", "add", "ok", "--source", f"imagefolder:{inside}/train", "--crop", "32")
    code, epochs, err = received(daemon.client("ok", "--ids", "0:30", "--batch", "10"))
    assert code == 0 and sorted(epochs[0]) == list(range(30)), err
    r = daemon.cli("dataset", "add", "out", "--source", f"imagefolder:{outside}", "--crop", "32", check=False)
    assert r.returncode == 1 and "outside the daemon's data root" in r.stderr, r.stderr
    listing = os.path.join(inside, "list.txt")
    with open(listing, "w") as f:
        f.write("train/class0/img_0000.jpg\t0\n../elsewhere/class0/img_0001.jpg\t0\n")
    r = daemon.cli("dataset", "add", "escape", "--source", f"filelist:{listing}", "--crop", "32", check=False)
    assert r.returncode == 1 and "line 2:" in r.stderr and "outside the daemon's data root" in r.stderr, r.stderr


def test_a_data_root_that_is_not_a_directory_is_refused_at_start(workdir):
    r = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "s.sock"), "--data-root", "/nonexistent/x"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--data-root /nonexistent/x" in r.stderr, r.stderr


# ---- hostile protocol messages ----

def test_absurd_protocol_messages_get_clear_errors_and_the_daemon_goes_on(daemon):
    add_synthetic(daemon)
    survivor = daemon.client("synth", "--ids", "0:200", "--batch", "8", "--epochs", "3", "--delay-ms", "2")
    assert raw(daemon, "first-not-register", "synth")[:2] == (3, "the first message of a job stream must be Register")
    if "TSAN_OPTIONS" not in os.environ:
        # Under TSan, a TSan-built client sending 70 MiB to a TSan-built daemon spins in gRPC's
        # uninstrumented transport for minutes (0.9 s when either side is a plain build); the
        # plain and ASan runs cover this step.
        code, message, _ = raw(daemon, "huge-register", "synth")
        assert code == 8, message  # RESOURCE_EXHAUSTED: over the 64 MiB message limit
    code, message, _ = raw(daemon, "long-name", "synth")
    assert (code, message) == (3, "the job name is 1048576 bytes long, more than the limit of 256")
    code, message, _ = raw(daemon, "long-dataset-name")
    assert (code, message) == (3, "the dataset name is 1048576 bytes long, more than the limit of 256")
    code, message, _ = raw(daemon, "control-chars")
    assert (code, message) == (3, "the dataset name contains a control character")
    code, message, lines = raw(daemon, "acks-out-of-thin-air", "synth")
    assert code == 0 and lines == ["exact"], (code, message, lines)
    code, epochs, err = received(survivor)
    assert code == 0, err
    expect_exact_epochs(epochs, range(200), 3)
    s = daemon.status()
    assert s["jobs"] == [] and s["pinned_bytes"] == 0 and [d["name"] for d in s["datasets"]] == ["synth"]


# ---- resources a client can hold ----

def anonymous_memory(pid):
    """The process's private memory in bytes (RssAnon: the shared-memory arena is not in it)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def test_a_prefetch_of_a_billion_batches_is_bounded_by_the_cache(daemon):
    add_synthetic(daemon)
    before = anonymous_memory(daemon.proc.pid)
    code, epochs, err = received(daemon.client("synth", "--batch", "4", "--epochs", "2", "--prefetch", str(10**9)))
    assert code == 0, err
    expect_exact_epochs(epochs, list(range(400)), 2)
    assert anonymous_memory(daemon.proc.pid) - before < 64 << 20


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_open_jobs_add_no_threads_to_the_daemon(daemon):
    # Job streams run on gRPC's callback API: no thread per job (there were two: a handler and an
    # acknowledgement reader), so 32 jobs that hold their streams open add at most a few of gRPC's.
    add_synthetic(daemon)
    daemon.status()
    idle = threads_of(daemon.proc.pid)
    holder = subprocess.Popen([RAW_CLIENT, daemon.socket, "hold-jobs", "synth", "32"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open 32"
        jobs = daemon.status()["jobs"]
        assert len(jobs) == 32
        time.sleep(0.5)  # every job's queue fills and its first batches are written
        busy = threads_of(daemon.proc.pid)
        print(f"daemon threads: {idle} idle, {busy} with 32 open jobs")
        assert busy <= idle + 8, (idle, busy)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    deadline = time.monotonic() + 10
    while daemon.status()["jobs"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon.status()["jobs"] == [] and daemon.status()["pinned_bytes"] == 0


def test_a_job_stream_that_never_registers_is_closed_after_the_timeout(daemon_factory):
    daemon = daemon_factory(extra=("--register-timeout", "0.5"))
    start = time.monotonic()
    code, message, _ = raw(daemon, "never-register")
    elapsed = time.monotonic() - start
    assert (code, message) == (4, "no Register message within 0.5 s of opening the job stream")  # DEADLINE_EXCEEDED
    assert 0.4 < elapsed < 5, elapsed
    add_synthetic(daemon)  # and it goes on serving
    code, epochs, err = received(daemon.client("synth", "--ids", "0:20", "--batch", "4"))
    assert code == 0, err
    expect_exact_epochs(epochs, range(20), 1)
