#!/usr/bin/env python3
"""The paper's headline on a GPU: k ResNet-18 trainings on one GPU, fed by one Joader daemon vs by
k torch.utils.data.DataLoaders. Reports images/s per job and the GPU's mean utilisation.

    make build && /usr/bin/python3 bench/gpu/resnet_k_jobs.py --k 4 --steps 200 [--data DIR]

Each side runs the k trainings concurrently for --steps steps of --batch-size after --warmup
steps (cuDNN autotuning, first loads); throughput is measured between warm-up and the end, per
job, and for all jobs together over the window in which all were measuring. GPU utilisation is sampled with nvidia-smi every 200 ms while the jobs run. The baseline's
DataLoaders get cores/k workers each; the daemon gets as many loader threads in total. Without a
GPU, --device cpu --steps 2 checks that the script works.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
from daemon_process import Daemon  # noqa: E402  (python/joader/daemon.py)

TRAIN = r'''
import json, sys, time, torch, torchvision
args = json.loads(sys.argv[1])
torch.backends.cudnn.benchmark = True
device = torch.device(args["device"])
if args["loader"] == "joader":
    sys.path.insert(0, args["python"])
    import joader
    from joader.torch import DataLoader
    loader = DataLoader("gpu-bench", batch_size=args["batch"], epochs=None, client=joader.Client(args["socket"]))
else:
    from torchvision import transforms
    ds = torchvision.datasets.ImageFolder(args["data"], transform=transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()]))
    loader = torch.utils.data.DataLoader(ds, batch_size=args["batch"], shuffle=True, num_workers=args["workers"],
                                         persistent_workers=True, pin_memory=device.type == "cuda", drop_last=True)
model = torchvision.models.resnet18(num_classes=1000).to(device).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
step, seen, start = 0, 0, None
total = args["warmup"] + args["steps"]
while step < total:
    for images, labels in loader:
        images = images.to(device, non_blocking=True).float().sub_(mean).div_(std)
        images = images.contiguous(memory_format=torch.channels_last)
        labels = labels.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step == args["warmup"]:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.monotonic()
            progress = [(start, 0)]
        elif step > args["warmup"]:
            seen += len(labels)
            progress.append((time.monotonic(), seen))  # after the step's work was queued
        if step >= total:
            break
if device.type == "cuda":
    torch.cuda.synchronize()
progress.append((time.monotonic(), seen))
print(json.dumps({"images_per_s": seen / (time.monotonic() - start), "progress": progress}))
'''


class GpuSampler:
    def __init__(self):
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          "-lms", "200"], stdout=subprocess.PIPE, text=True)
        except FileNotFoundError:
            self.proc = None

    def stop(self):
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate()
        values = [float(v) for v in out.split() if v.replace(".", "").isdigit()]
        return statistics.mean(values) if values else None


def common_window_rate(outs):
    """Aggregate images/s over the window in which every job was measuring (from the last job's
    end of warm-up to the first job's end): per-job rates over different windows do not add up."""
    t0 = max(o["progress"][0][0] for o in outs)
    t1 = min(o["progress"][-1][0] for o in outs)
    if t1 <= t0:
        return None  # the jobs never ran together

    def seen_at(progress, t):  # images done by time t, linear between samples
        for (ta, na), (tb, nb) in zip(progress, progress[1:]):
            if ta <= t <= tb:
                return na + (nb - na) * ((t - ta) / (tb - ta) if tb > ta else 1.0)
        return progress[-1][1] if t >= progress[-1][0] else 0.0

    return sum(seen_at(o["progress"], t1) - seen_at(o["progress"], t0) for o in outs) / (t1 - t0)


def run_side(loader, args, build, data, tmp):
    daemon = None
    common = dict(device=args.device, batch=args.batch_size, steps=args.steps, warmup=args.warmup, data=data,
                  python=os.path.join(build, "python"), loader=loader, workers=max(1, os.cpu_count() // args.k))
    try:
        if loader == "joader":
            daemon = Daemon(os.path.join(build, "joader"), tmp, name="gpu", cache_size=args.cache_size,
                            threads=os.cpu_count())
            daemon.cli("dataset", "add", "gpu-bench", "--source", f"imagefolder:{data}", "--resize", "256", "--crop",
                       "224", timeout=3600)
            common["socket"] = daemon.socket
        gpu = GpuSampler()
        procs = [subprocess.Popen(["/usr/bin/python3", "-c", TRAIN, json.dumps(common)], stdout=subprocess.PIPE,
                                  text=True) for _ in range(args.k)]
        outs = [json.loads(p.communicate()[0]) for p in procs]
        util = gpu.stop()
        status = None
        if daemon is not None:
            status = daemon.status()
        return {"per_job": [o["images_per_s"] for o in outs], "aggregate": common_window_rate(outs),
                "gpu_util": util, "ld_ratio": status["ld_ratio"] if status else None}
    finally:
        if daemon is not None:
            daemon.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default=None, help="an ImageFolder (default: generate 5000 JPEGs under build/)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--cache-size", default="8GiB")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    data = args.data or os.path.join(build, "gpu-data")
    if not os.path.isdir(data):
        subprocess.run([os.path.join(build, "make_images"), data, "--classes", "10", "--per-class", "500",
                        "--size", "500x375"], check=True)
    with tempfile.TemporaryDirectory(prefix="joader-gpu-") as tmp:
        os.chmod(tmp, 0o700)
        results = {side: run_side(side, args, build, data, tmp) for side in ("torch", "joader")}
    for side, r in results.items():
        util = "n/a" if r["gpu_util"] is None else f"{r['gpu_util']:.0f} %"
        aggregate = "n/a (the jobs never ran together)" if r["aggregate"] is None else f"{r['aggregate']:.0f}"
        print(f"{side:>6}: {args.k} jobs, images/s per job {', '.join(f'{x:.0f}' for x in r['per_job'])}, "
              f"aggregate over the common window {aggregate}, GPU utilisation {util}, L/D {r['ld_ratio']}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
