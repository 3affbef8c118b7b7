"""`make demo` / `joader demo`: three real PyTorch trainings sharing one Joader daemon.

It generates a small ImageFolder (3000 JPEGs, 10 classes) in a temporary folder under build/,
starts `joader serve` with a cache of 28 MiB (about 40 % of the decoded dataset, so that sharing
must come from the coupled sampler, not from caching everything), registers the images decoded at
their own size, and runs three training processes (a small CNN on CPU) with overlapping subsets,
staggered starts and different batch sizes. Each trains with its own random crops and flips
(RandomResizedCrop + RandomHorizontalFlip, run per item in C++) and evaluates on held-out items
after every epoch (Resize + CenterCrop, a second job on the same decoded dataset). It shows live
progress from the daemon and ends with what each job did and how much decoding the sharing saved.
Everything it creates is removed at the end, also on Ctrl-C.

    PYTHONPATH=build/python /usr/bin/python3 -m joader.demo [--build build]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

JOBS = [  # name, share of the dataset, batch size, start delay (s)
    ("baseline-all", 1.00, 32, 0.0),
    ("ablation-75pct", 0.75, 64, 2.0),
    ("fewshot-50pct", 0.50, 16, 4.0),
]
EPOCHS = 3
CLASSES, PER_CLASS = 10, 300


def train(args):
    """One training process: a small CNN on CPU, fed by joader.torch.DataLoader."""
    import numpy as np
    import torch

    import joader
    from joader.torch import DataLoader

    import torchvision.transforms as T

    torch.set_num_threads(1)
    torch.manual_seed(0)
    client = joader.Client(args.socket)
    n = client.dataset("demo")["items"]
    order = np.random.default_rng(7).permutation(n)
    held_out, rest = order[:300], order[300:]  # the same held-out items for every job
    subset = rest[: int(len(rest) * args.share)]
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(32 * 16, CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    # Training: each job's own random crops and flips, drawn per item and per epoch, run in C++ on
    # the image the daemon decoded once for every job. Evaluation: Resize + CenterCrop.
    loader = DataLoader("demo", batch_size=args.batch, indices=subset, epochs=EPOCHS, name=args.name, client=client,
                        dtype=torch.float32,
                        augment=T.Compose([T.RandomResizedCrop(64, scale=(0.35, 1.0)), T.RandomHorizontalFlip()]))
    evaluate = DataLoader("demo", batch_size=100, indices=held_out, epochs=EPOCHS, name=args.name + "-eval",
                          client=client, dtype=torch.float32, augment=T.Compose([T.Resize(72), T.CenterCrop(64)]))
    items, epoch_losses, accuracies = 0, [], []
    for epoch in range(EPOCHS):
        losses = []
        model.train()
        for images, labels in loader:
            out = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            out.backward()
            opt.step()
            items += len(labels)
            losses.append(out.item())
        epoch_losses.append(sum(losses) / len(losses))
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for images, labels in evaluate:
                correct += int((model(images).argmax(1) == labels).sum())
                total += len(labels)
        accuracies.append(correct / total)
    with open(args.result, "w") as f:
        json.dump({"name": args.name, "epochs": EPOCHS, "items": items, "losses": epoch_losses,
                   "accuracy": accuracies}, f)


def progress_line(status):
    jobs = "  ".join(f"{j['name']}: done" if j["finished"] else
                     f"{j['name']}: epoch {j['epoch']} {j['delivered_in_epoch']}/{j['subset_size']}"
                     f" ({j['items_per_second']:.0f}/s)" for j in status["jobs"])
    return f"loads {status['loads']:>5}  deliveries {status['deliveries']:>6}  L/D {status['ld_ratio']:.2f}  | {jobs}"


def main():
    ap = argparse.ArgumentParser(description="Three PyTorch trainings sharing one Joader daemon")
    ap.add_argument("--build", default=os.environ.get("JOADER_BUILD", "build"))
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--share", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.train:
        return train(args)

    import joader
    from joader.daemon import Daemon

    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="demo-", dir=build)
    os.chmod(work, 0o700)
    procs = []
    daemon = None
    try:
        t0 = time.monotonic()
        print(f"Generating {CLASSES * PER_CLASS} JPEGs in {CLASSES} classes ...", flush=True)
        subprocess.run([os.path.join(build, "make_images"), os.path.join(work, "images"), "--classes", str(CLASSES),
                        "--per-class", str(PER_CLASS), "--size", "96x80", "--learnable"], check=True)
        daemon = Daemon(os.path.join(build, "joader"), work, cache_size="28MiB")
        socket = daemon.socket
        client = joader.Client(socket)
        info = client.add_dataset("demo", source=f"imagefolder:{work}/images")  # decoded once, own size
        print(f"Daemon up; dataset 'demo': {info['items']} items, {info['prep']}.")
        print("Starting 3 training jobs (overlapping subsets, staggered starts, different batch sizes), each with\n"
              "its own RandomResizedCrop + RandomHorizontalFlip, and an evaluation on 300 held-out items per epoch:")
        for name, share, batch, _ in JOBS:
            print(f"  {name:<16} {share:>4.0%} of the training items, batch {batch:>2}, {EPOCHS} epochs")
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
        start = time.monotonic()
        pending = list(JOBS)
        tty = sys.stdout.isatty()
        last_print = 0.0
        while pending or any(p.poll() is None for p in procs):
            now = time.monotonic() - start
            while pending and pending[0][3] <= now:
                name, share, batch, _ = pending.pop(0)
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "joader.demo", "--train", "--socket", socket, "--name", name,
                     "--share", str(share), "--batch", str(batch), "--result", os.path.join(work, name + ".json")],
                    env=env))
            status = client.status()
            if tty:
                print("\r" + progress_line(status)[:160].ljust(160), end="", flush=True)
            elif now - last_print >= 2:
                print(progress_line(status), flush=True)
                last_print = now
            time.sleep(0.25)
        if tty:
            print()
        failed = [name for (name, *_), p in zip(JOBS, procs) if p.returncode != 0]
        if failed:
            raise RuntimeError(f"training job(s) failed: {failed}")
        status = client.status()
        results = [json.load(open(os.path.join(work, name + ".json"))) for name, *_ in JOBS]
        print(f"\n{'job':<16} {'epochs':>6} {'items':>7}   {'mean loss per epoch':<26} held-out accuracy")
        for r in results:
            losses = " → ".join(f"{x:.3f}" for x in r["losses"])
            print(f"{r['name']:<16} {r['epochs']:>6} {r['items']:>7}   {losses:<26} "
                  + " → ".join(f"{x:.2f}" for x in r["accuracy"]))
        loads, deliveries = status["loads"], status["deliveries"]
        print(f"\ndaemon: {loads} loads (read + decode) for {deliveries} deliveries (training and evaluation): "
              f"L/D {status['ld_ratio']:.3f}")
        print(f"Independent DataLoaders would have decoded {deliveries} images; Joader decoded {loads}: "
              f"{100 * (1 - loads / deliveries):.0f} % of the decode work saved. The crops stayed each job's own.")
        print(f"(total {time.monotonic() - t0:.0f} s)")
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the jobs and the daemon")
        return 130
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
