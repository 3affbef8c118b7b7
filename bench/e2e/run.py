#!/usr/bin/env python3
"""End-to-end benchmark: k training jobs fed by Joader vs by k torch.utils.data.DataLoader processes.

    make build && /usr/bin/python3 bench/e2e/run.py [--runs 3] [--images 2000] [--out docs]

Data (--data): "synthetic", a generated ImageFolder of 500x375 JPEGs (quality 90, 10 classes)
under build/e2e-data; or "photos", crops of the photographs Debian ships (tests/data/make_photos.py:
longer side 300-800 px, baseline 4:2:0/4:2:2/4:4:4, progressive, gray and CMYK JPEGs at quality
60-98, 10 classes) under build/e2e-photos, whose results go to OUT/e2e_photos_*. Made once, reused. Baseline: k processes, each a DataLoader(ImageFolder, Resize(256),
CenterCrop(224), PILToTensor(), shuffle=True, persistent_workers=True, prefetch_factor=PREFETCH_FACTOR). Joader: the same k jobs through joader.torch
against one daemon. Both sides get the same number of loader threads in total: T = max(2, k)
(DataLoader workers = T / k per job; daemon --threads T). Every configuration runs --runs times,
baseline and Joader alternately; figures are medians, ratios are computed pair by pair. The jobs
of a scenario start together once all are set up (a barrier after their imports), or at their
stagger after the first.
The machine's limit (eval pipeline): every load costs the prep time p, every delivery the job's
and the daemon's CPU c for a cached item, on all cores: limit = D / ((L·p + D·c) / cores) images/s
for the L loads and D deliveries of each Joader run; p (build/prep_bench, one thread, on the same
files) and c (bench/client_cost.py) are measured in the same run, before and after the scenarios,
and each row prints the fraction of the limit that Joader reached. A second limit takes p_all, the
prep per load while every core runs prep_bench at once (on a VM, one decode alone can be faster
than each of two together): the machine's decode throughput is then cores / p_all.
Scenarios: (a) k = 1; (b) k = 2 and 4, identical subsets, same start; (c) k = 4, each a random
75 % subset, starts staggered by a quarter of a one-job epoch; (d) k = 4 identical subsets with
0, 10, 20, 40 ms of "training" per batch.
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
from daemon_process import Daemon  # noqa: E402  (python/joader/daemon.py)
PY = "/usr/bin/python3"
BATCH = 64


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def make_data(build, root, images, kind="synthetic"):
    if len(glob.glob(os.path.join(root, "*", "*.jpg"))) == images:
        return
    subprocess.run(["rm", "-rf", root], check=True)
    if kind == "photos":
        print(f"making {images} JPEGs from photographs in {root} ...", file=sys.stderr)
        subprocess.run([PY, os.path.join(HERE, "..", "..", "tests", "data", "make_photos.py"), root, "--count",
                        str(images), "--min", "300", "--max", "800", "--classes", "10", "--jpeg-only"], check=True)
        return
    print(f"generating {images} JPEGs (500x375, q90) in {root} ...", file=sys.stderr)
    subprocess.run([os.path.join(build, "make_images"), root, "--classes", "10", "--per-class", str(images // 10),
                    "--size", "500x375"], check=True)


def scenarios(epoch_seconds, pipeline="eval"):
    """name -> list of job specs (share, subset seed, start delay s, sleep ms per batch)."""
    same = lambda k: [dict(share=1.0, seed=0, start=0.0, sleep=0.0) for _ in range(k)]
    if pipeline in ("train", "recipe", "timm", "user"):
        return {"a: k=1": same(1), "b: k=2 identical": same(2), "b: k=4 identical": same(4)}
    return {
        "a: k=1": same(1),
        "b: k=2 identical": same(2),
        "b: k=4 identical": same(4),
        "c: k=4, 75% subsets, staggered": [dict(share=0.75, seed=j + 1, start=j * epoch_seconds / 4, sleep=0.0)
                                           for j in range(4)],
        "d: k=4 identical, 0/10/20/40 ms per batch": [dict(share=1.0, seed=0, start=0.0, sleep=s)
                                                      for s in (0.0, 10.0, 20.0, 40.0)],
    }


def scenario_key(name):
    """'b: k=4 identical' -> 'b4'; 'a: k=1' -> 'a'."""
    letter = name.split(":")[0]
    return letter + name.split("k=")[1][0] if letter == "b" else letter


def run_jobs(commands, starts, env=None):
    """Starts every command, waits until each has printed "ready" (interpreter, torch and dataset
    set up), then tells each to go at its delay after the first; returns the JSON line of each."""
    procs = [subprocess.Popen(c + ["--barrier"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for c in commands]
    for i, p in enumerate(procs):
        line = p.stdout.readline()
        if line.strip() != "ready":
            for q in procs:
                q.kill()
            raise RuntimeError(f"job did not get ready ({line!r}): {commands[i]}")
    t0 = time.monotonic()
    for i in sorted(range(len(commands)), key=lambda i: starts[i]):
        delay = starts[i] - (time.monotonic() - t0)
        if delay > 0:
            time.sleep(delay)
        procs[i].stdin.write("go\n")
        procs[i].stdin.flush()
    results = [None] * len(commands)
    for i, p in enumerate(procs):
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"job failed: {commands[i]}")
        results[i] = json.loads(out)
    return results


# The baseline's DataLoader prefetch_factor (batches each worker prepares ahead): the best of the
# values tried by `--tune-prefetch 2,4,8` on this machine (docs/BENCHMARKS.md).
PREFETCH_FACTOR = 8


def run_baseline(root, jobs, pipeline="eval", epochs=1, prefetch=PREFETCH_FACTOR):
    threads = max(2, len(jobs))
    workers = max(1, threads // len(jobs))
    cmds = [[PY, os.path.join(HERE, "job_torch.py"), root, "--batch-size", str(BATCH), "--workers", str(workers),
             "--share", str(j["share"]), "--subset-seed", str(j["seed"]), "--sleep-ms", str(j["sleep"]),
             "--pipeline", pipeline, "--epochs", str(epochs), "--prefetch-factor", str(prefetch)] for j in jobs]
    cpu0 = cpu_children()
    results = run_jobs(cmds, [j["start"] for j in jobs])
    return summarize(results, cpu_children() - cpu0, None)


CACHE_SIZE = "512MiB"  # the daemon's --cache-size (--cache-size changes it)
ARENA_WAIT = 120.0  # seconds to wait for the daemon's arena to be ready before the jobs start (--arena-wait)


def wait_for_arena(daemon, timeout):
    """Waits until the daemon reports its arena ready (every page mapped and touched by its
    background thread, as in a daemon that has run for a while: docs/DAEMON.md, "First touches"), at
    most `timeout` seconds. 0: no wait, as a daemon just started."""
    if timeout > 0 and not daemon.wait_arena_ready(timeout):
        print(f"  the daemon's arena was not ready after {timeout:.0f} s; starting the jobs anyway", file=sys.stderr)


def run_joader(build, root, jobs, tmp, pipeline="eval", epochs=1):
    threads = max(2, len(jobs))
    workers = max(1, threads // len(jobs))  # the recipe's Python pool: as many as the baseline's workers
    cpu0 = cpu_children()
    daemon = Daemon(os.path.join(build, "joader"), tmp, name="e2e", cache_size=CACHE_SIZE, threads=threads)
    socket = daemon.socket
    try:
        prep = ["--resize", "256", "--crop", "224"] if pipeline == "eval" else []  # train: decoded, own size
        daemon.cli("dataset", "add", "e2e", "--source", f"imagefolder:{root}", *prep)
        wait_for_arena(daemon, ARENA_WAIT)
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
        cmds = [[PY, os.path.join(HERE, "job_joader.py"), "--socket", socket, "--batch-size", str(BATCH),
                 "--share", str(j["share"]), "--subset-seed", str(j["seed"]), "--sleep-ms", str(j["sleep"]),
                 "--pipeline", pipeline, "--epochs", str(epochs), "--workers", str(workers)] for j in jobs]
        results = run_jobs(cmds, [j["start"] for j in jobs], env)
        status = daemon.status()
    finally:
        daemon.stop()
    out = summarize(results, cpu_children() - cpu0, status["ld_ratio"])
    out["loads"], out["deliveries"] = status["loads"], status["deliveries"]
    # Whether the arena was in huge pages: 1.4x on a first epoch (docs/DAEMON.md, "Huge pages").
    out["arena_pages"], out["arena_huge_bytes"] = status["arena_pages"], status["arena_huge_bytes"]
    return out


def summarize(results, cpu, ld):
    """Throughput over the loading itself: from the first job's first batch request to the last
    job's end (CLOCK_MONOTONIC is shared by processes), so interpreter and torch start-up, the
    same on both sides, is left out. CPU seconds include everything: start-up, workers, daemon."""
    items = sum(r["items"] for r in results)
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    out = {"images_per_s": items / wall, "cpu_per_image_ms": 1000 * cpu / items, "wall": wall,
           "job_seconds": [round(r["seconds"], 2) for r in results], "ld_ratio": ld, "items": items}
    if len(results[0]["epoch_ends"]) > 1:
        # First epoch: from the first request (a DataLoader's workers start inside it; the daemon
        # was started and the dataset indexed before) to the last job's end of epoch 0. Steady state:
        # the later epochs, from the first job's end of epoch 0 to the last job's end.
        first_end = max(r["epoch_ends"][0] for r in results)
        out["first_epoch_images_per_s"] = sum(r["epoch_items"][0] for r in results) / (
            first_end - min(r["start"] for r in results))
        steady_start = min(r["epoch_ends"][0] for r in results)
        out["steady_images_per_s"] = sum(sum(r["epoch_items"][1:]) for r in results) / (
            max(r["end"] for r in results) - steady_start)
    return out


def prep_ms(build, root, instances=1):
    """The eval prep per load (build/prep_bench's BM_Prepare_Resize256_Crop224), ms: one thread alone,
    or with `instances` > 1 the per-load time of that many instances running at once, as
    instances / (their summed loads per ms), so that cores / it is the machine's prep throughput."""
    command = [os.path.join(build, "prep_bench"), "--benchmark_filter=BM_Prepare_Resize256_Crop224$",
               "--benchmark_format=json", "--benchmark_min_time=1", root]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(instances)]
    times = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({proc.returncode})")
        bench = json.loads(out)["benchmarks"][0]
        assert bench["time_unit"] == "ms", bench
        times.append(bench["real_time"])
    return instances / sum(1 / t for t in times)


def delivery_ms(build):
    """CPU per delivery of a cached item, the job's and the daemon's (bench/client_cost.py, NCHW, the
    median of 3 runs), ms: 2 epochs of 2000 items after the job's untimed first (4000 deliveries, so
    that the daemon's CPU, counted in 10 ms ticks, is resolved to ~2.5 us per image)."""
    r = subprocess.run([PY, os.path.join(HERE, "..", "client_cost.py"), "--build", build, "--runs", "3",
                        "--items", "2000", "--epochs", "2"], check=True, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.strip().startswith("NCHW:"):  # "NCHW: job 0.0500 ms, daemon 0.0125 ms"
            words = line.replace(",", "").split()
            return float(words[2]) + float(words[5])
    raise RuntimeError(f"bench/client_cost.py printed no NCHW line:\n{r.stdout}")


def measure_costs(build, root):
    p, c, p_all = prep_ms(build, root), delivery_ms(build), prep_ms(build, root, os.cpu_count())
    print(f"costs: prep {p:.3f} ms per load ({p_all:.3f} with every core preparing), delivery {c:.4f} ms CPU "
          "per image", file=sys.stderr)
    return p, c, p_all


def limit_ips(run, p, c, cores):
    """The machine's limit for a Joader run's loads and deliveries (see the module's docstring)."""
    return run["deliveries"] / ((run["loads"] * p + run["deliveries"] * c) / 1000 / cores)


def main():
    global CACHE_SIZE, ARENA_WAIT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--out", default="docs")
    ap.add_argument("--plot-only", action="store_true", help="redraw the plot from OUT/e2e_results.json")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per job; with 2 or more, first-epoch and steady-state images/s are reported apart")
    ap.add_argument("--pipeline", choices=["eval", "train", "recipe", "timm", "user"], default="eval",
                    help="eval: Resize(256) + CenterCrop(224), shared whole; train: RandomResizedCrop(224) + "
                         "RandomHorizontalFlip(), decode shared, augmentation per job (results in e2e_train_*); "
                         "recipe: torchvision's ta_wide + RandomErasing(0.1) reference recipe, float32 "
                         "(e2e_recipe_*); timm: timm's default RandomResizedCrop + flip + ColorJitter(0.4) + "
                         "ToTensor + Normalize (e2e_timm_*); user: crop + flip + a user's own transform "
                         "(bench/e2e/timed.py AddNoise, in Joader's Python pool) + ToTensor + Normalize "
                         "(e2e_user_*)")
    ap.add_argument("--data", choices=["synthetic", "photos"], default="synthetic",
                    help="synthetic 500x375 JPEGs, or crops of real photographs (results in e2e_photos_*)")
    ap.add_argument("--scenarios", metavar="LETTERS",
                    help="only these scenarios, e.g. 'a,b4' (a, b2, b4, c, d; default: all)")
    ap.add_argument("--tune-prefetch", metavar="N,N,...",
                    help="only measure the baseline with each DataLoader prefetch_factor (k = 1 and k = 4, "
                         "--runs runs each, interleaved) and print the medians")
    ap.add_argument("--cache-size", default="512MiB", help="the daemon's --cache-size (default %(default)s)")
    ap.add_argument("--arena-wait", type=float, default=ARENA_WAIT,
                    help="seconds to wait, before each Joader run's jobs start, for the daemon to have touched "
                         "every page of its arena, as one that has run a while has (0: do not wait, as a "
                         "daemon just started; default %(default)s)")
    args = ap.parse_args()
    CACHE_SIZE, ARENA_WAIT = args.cache_size, args.arena_wait
    stem = {"eval": "e2e", "train": "e2e_train", "recipe": "e2e_recipe", "timm": "e2e_timm",
            "user": "e2e_user"}[args.pipeline] + (
        "_photos" if args.data == "photos" else "")
    if args.plot_only:
        with open(os.path.join(args.out, f"{stem}_results.json")) as f:
            return plot(json.load(f)["rows"], os.path.join(args.out, f"{stem}.png"), args.pipeline)
    build = os.path.abspath(args.build)
    root = os.path.join(build, "e2e-data" if args.data == "synthetic" else "e2e-photos")
    make_data(build, root, args.images, args.data)
    sizes = [os.path.getsize(p) for p in glob.glob(os.path.join(root, "*", "*.jpg"))]
    print(f"{len(sizes)} JPEGs, mean {statistics.mean(sizes) / 1000:.0f} KB", file=sys.stderr)

    if args.tune_prefetch:
        return tune_prefetch(root, [int(v) for v in args.tune_prefetch.split(",")], args)
    results = {}
    costs = [measure_costs(build, root)] if args.pipeline == "eval" else []
    with tempfile.TemporaryDirectory(prefix="joader-e2e-") as tmp:
        os.chmod(tmp, 0o700)
        # A one-job epoch on each side sets that side's quarter-epoch stagger for scenario (c).
        one = [dict(share=1.0, seed=0, start=0.0, sleep=0.0)]
        epoch_s = {"torch": run_baseline(root, one, args.pipeline)["wall"],
                   "joader": run_joader(build, root, one, tmp, args.pipeline)["wall"]}  # one epoch
        print(f"one-job epoch: torch {epoch_s['torch']:.2f} s, joader {epoch_s['joader']:.2f} s", file=sys.stderr)
        names = list(scenarios(1.0, args.pipeline))
        if args.scenarios:
            wanted = set(args.scenarios.split(","))
            names = [n for n in names if scenario_key(n) in wanted]
            if not names:
                ap.error(f"--scenarios {args.scenarios}: none of a, b2, b4, c, d")
        for name in names:
            results[name] = {"torch": [], "joader": []}
            for run in range(args.runs):
                b = run_baseline(root, scenarios(epoch_s["torch"], args.pipeline)[name], args.pipeline, args.epochs)
                j = run_joader(build, root, scenarios(epoch_s["joader"], args.pipeline)[name], tmp, args.pipeline,
                               args.epochs)
                results[name]["torch"].append(b)
                results[name]["joader"].append(j)
                print(f"{name} run {run + 1}: torch {b['images_per_s']:.0f} img/s {b['cpu_per_image_ms']:.2f} ms CPU/img"
                      f" | joader {j['images_per_s']:.0f} img/s {j['cpu_per_image_ms']:.2f} ms CPU/img"
                      f" L/D {j['ld_ratio']:.3f}", file=sys.stderr)
                if "steady_images_per_s" in b:
                    print(f"    first epoch: torch {b['first_epoch_images_per_s']:.0f}, joader "
                          f"{j['first_epoch_images_per_s']:.0f} img/s; steady state: torch "
                          f"{b['steady_images_per_s']:.0f}, joader {j['steady_images_per_s']:.0f} img/s",
                          file=sys.stderr)

    if costs:
        costs.append(measure_costs(build, root))
    med = statistics.median
    rows = []
    for name in names:
        t, j = results[name]["torch"], results[name]["joader"]
        speedup = med(x["images_per_s"] / y["images_per_s"] for x, y in zip(j, t))
        cpu_ratio = med(x["cpu_per_image_ms"] / y["cpu_per_image_ms"] for x, y in zip(j, t))
        slowest_ratio = med(max(x / y for x, y in zip(jr["job_seconds"], tr["job_seconds"])) for jr, tr in zip(j, t))
        rows.append(dict(name=name, torch_ips=med(x["images_per_s"] for x in t), joader_ips=med(x["images_per_s"] for x in j),
                         speedup=speedup, torch_cpu=med(x["cpu_per_image_ms"] for x in t),
                         joader_cpu=med(x["cpu_per_image_ms"] for x in j), cpu_ratio=cpu_ratio,
                         ld=med(x["ld_ratio"] for x in j), slowest=slowest_ratio,
                         torch_jobs=t[len(t) // 2]["job_seconds"], joader_jobs=j[len(j) // 2]["job_seconds"]))
        if costs:
            p, c = statistics.mean(x[0] for x in costs), statistics.mean(x[1] for x in costs)
            achieved = "first_epoch_images_per_s" if "first_epoch_images_per_s" in j[0] else "images_per_s"
            p_all = statistics.mean(x[2] for x in costs)
            rows[-1].update(prep_ms=p, delivery_ms=c, limit=med(limit_ips(x, p, c, os.cpu_count()) for x in j),
                            fraction=med(x[achieved] / limit_ips(x, p, c, os.cpu_count()) for x in j),
                            prep_all_ms=p_all, limit_all=med(limit_ips(x, p_all, c, os.cpu_count()) for x in j),
                            fraction_all=med(x[achieved] / limit_ips(x, p_all, c, os.cpu_count()) for x in j))
        if "steady_images_per_s" in t[0]:
            rows[-1].update(
                torch_first=med(x["first_epoch_images_per_s"] for x in t),
                joader_first=med(x["first_epoch_images_per_s"] for x in j),
                first_speedup=med(x["first_epoch_images_per_s"] / y["first_epoch_images_per_s"] for x, y in zip(j, t)),
                torch_steady=med(x["steady_images_per_s"] for x in t),
                joader_steady=med(x["steady_images_per_s"] for x in j),
                steady_speedup=med(x["steady_images_per_s"] / y["steady_images_per_s"] for x, y in zip(j, t)))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{stem}_results.json"), "w") as f:
        json.dump({"rows": rows, "raw": results, "mean_jpeg_kb": statistics.mean(sizes) / 1000}, f, indent=1)

    pages = sorted({f"{x['arena_pages']}, {x['arena_huge_bytes'] >> 20} MiB in 2 MiB pages"
                    for r in results.values() for x in r["joader"]})
    print(f"Joader's arena ({CACHE_SIZE}): {'; '.join(pages)}\n")
    print(f"| scenario | PyTorch img/s | Joader img/s | speed-up | PyTorch CPU ms/img | Joader CPU ms/img | "
          f"CPU ratio | Joader L/D | per-job time, PyTorch (s) | per-job time, Joader (s) | slowest job ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['torch_ips']:.0f} | {r['joader_ips']:.0f} | {r['speedup']:.2f}× | "
              f"{r['torch_cpu']:.2f} | {r['joader_cpu']:.2f} | {r['cpu_ratio']:.2f}× | {r['ld']:.3f} | "
              f"{', '.join(map(str, r['torch_jobs']))} | {', '.join(map(str, r['joader_jobs']))} | {r['slowest']:.2f} |")
    if "steady_speedup" in rows[0]:
        print("\n| scenario | first epoch: PyTorch img/s | Joader img/s | speed-up | steady state: PyTorch img/s | "
              "Joader img/s | speed-up |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['name']} | {r['torch_first']:.0f} | {r['joader_first']:.0f} | {r['first_speedup']:.2f}× | "
                  f"{r['torch_steady']:.0f} | {r['joader_steady']:.0f} | {r['steady_speedup']:.2f}× |")
    if costs:
        p, c, p_all = rows[0]["prep_ms"], rows[0]["delivery_ms"], rows[0]["prep_all_ms"]
        print(f"\nThe machine's limit ({os.cpu_count()} cores, prep {p:.3f} ms per load alone and {p_all:.3f} with "
              f"every core preparing, delivery {c:.4f} ms per image; each measured before and after the scenarios: "
              f"{', '.join(f'{x[0]:.3f}/{x[2]:.3f}/{x[1]:.4f}' for x in costs)}); Joader's first epoch against it:\n")
        print("| scenario | limit img/s | Joader img/s | fraction of the limit | limit, every core preparing | fraction |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['name']} | {r['limit']:.0f} | {r.get('joader_first', r['joader_ips']):.0f} | "
                  f"{100 * r['fraction']:.0f} % | {r['limit_all']:.0f} | {100 * r['fraction_all']:.0f} % |")
    plot(rows, os.path.join(args.out, f"{stem}.png"), args.pipeline)


def tune_prefetch(root, values, args):
    """The baseline alone at each prefetch_factor, runs interleaved so drift hits all values alike."""
    rates = {(k, v): [] for k in (1, 4) for v in values}
    for run in range(args.runs):
        for k in (1, 4):
            for v in values:
                r = run_baseline(root, scenarios(1.0, args.pipeline)["a: k=1" if k == 1 else "b: k=4 identical"],
                                 args.pipeline, args.epochs, prefetch=v)
                key = "steady_images_per_s" if "steady_images_per_s" in r else "images_per_s"
                rates[(k, v)].append(r[key])
                print(f"run {run + 1}, k={k}, prefetch_factor={v}: {r[key]:.0f} img/s", file=sys.stderr)
    print("| k | " + " | ".join(f"prefetch_factor={v}" for v in values) + " |")
    print("|---|" + "---:|" * len(values))
    for k in (1, 4):
        print(f"| {k} | " + " | ".join(f"{statistics.median(rates[(k, v)]):.0f}" for v in values) + " |")


def plot(rows, path, pipeline="eval"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [r["name"].split(",")[0].replace(": ", " ").replace(" identical", "") for r in rows]
    x = range(len(rows))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    w = 0.38
    ax1.bar([i - w / 2 for i in x], [r["torch_ips"] for r in rows], w, label="k × PyTorch DataLoader")
    ax1.bar([i + w / 2 for i in x], [r["joader_ips"] for r in rows], w, label="Joader")
    ax1.set_xticks(list(x), labels)
    ax1.set_ylabel("aggregate images/s")
    ax1.set_title("Throughput (higher is better)")
    ax1.legend()
    ax2.bar([i - w / 2 for i in x], [r["torch_cpu"] for r in rows], w, label="k × PyTorch DataLoader")
    ax2.bar([i + w / 2 for i in x], [r["joader_cpu"] for r in rows], w, label="Joader")
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("CPU ms per delivered image")
    ax2.set_title("CPU per image (lower is better)")
    what = {"eval": "Resize(256) -> CenterCrop(224)",
            "train": "RandomResizedCrop(224) -> RandomHorizontalFlip()\n(decode shared, crops per job)",
            "recipe": "ta_wide + RandomErasing(0.1) recipe, float32\n(decode shared, augmentation per job)",
            "timm": "timm's RRC + flip + ColorJitter(0.4) + Normalize, float32\n(decode shared, augmentation per job)",
            "user": "RRC + flip + a user's own transform (Joader: in its Python pool) + Normalize, float32"}[
        pipeline]
    fig.suptitle(f"2 vCPUs, 500x375 JPEGs -> {what}; medians of paired runs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
