"""publish.py KILN WORK — how `kiln build` publishes its output directory (gen/publish.c).

PASS/FAIL lines (tests/run.sh protocol):
  interrupt   SIGINT / SIGTERM while a build waits just before its swap
              (KILN_TEST_PUBLISH_DELAY_MS): the previous output is byte-for-byte intact
              and no staging directory is left;
  concurrent  10 overlapping builds of two variants of one model into one directory,
              while a reader that resolves the directory once per look (a dir fd)
              checks every look: the listing is one variant's complete set and m.h,
              m.c, m.json come from the same build; at the end the directory is
              exactly one variant's output. (A look that still holds a directory a
              newer build replaced may find its files gone — it is being deleted —
              but never finds another build's file: counted, not failed.);
  stale       rebuilding with fewer targets removes what the new build does not write;
  keep        files and directories of the user's in the output survive a rebuild;
  foreign     a directory holding another model's outputs is refused, untouched;
  leftover    a staging directory left by a killed build is removed by the next build.
"""
import filecmp
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

KILN, WORK = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
V1, V2 = os.path.join(HERE, "v1", "m.lua"), os.path.join(HERE, "v2", "m.lua")
OTHER = os.path.join(HERE, "other", "n.lua")
S = "hardening/publish"


def report(name, ok, why=""):
    print(("PASS %s/%s" % (S, name)) if ok else ("FAIL %s/%s: %s" % (S, name, why)), flush=True)


def build(script, out, *flags, env=None, check=True):
    r = subprocess.run([KILN, "build", script, "-o", out, *flags], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if check and r.returncode != 0:
        raise SystemExit("FAIL %s/build: %s" % (S, r.stderr.strip()))
    return r


def snapshot(d):
    """{relative path: bytes} of every file below d."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def siblings(out):
    base = os.path.basename(out)
    return sorted(e for e in os.listdir(os.path.dirname(out)) if e.startswith(base + ".kiln-"))


def interrupt():
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = os.path.join(WORK, "int-%d" % sig, "out")
        build(V1, out, "--target", "all")
        before = snapshot(out)
        p = subprocess.Popen([KILN, "build", V2, "-o", out, "--target", "c"], stderr=subprocess.PIPE,
                             env=dict(os.environ, KILN_TEST_PUBLISH_DELAY_MS="3000"))
        deadline = time.time() + 20          # until the staging directory holds the finished build
        while time.time() < deadline and not any(
                os.path.exists(os.path.join(os.path.dirname(out), s, "m.json")) for s in siblings(out)):
            time.sleep(0.02)
        time.sleep(0.1)
        p.send_signal(sig)
        p.wait()
        name = "interrupt/" + signal.Signals(sig).name
        if p.returncode != -sig:
            report(name, False, "exit status %s, expected death by the signal" % p.returncode)
        elif snapshot(out) != before:
            report(name, False, "the previous output changed")
        elif siblings(out):
            report(name, False, "left behind: %s" % siblings(out))
        else:
            report(name, True)


def concurrent():
    out = os.path.join(WORK, "conc", "out")
    sets = {}
    for v, script in (("v1", V1), ("v2", V2)):
        d = os.path.join(WORK, "conc", v)
        build(script, d, "--target", "all" if v == "v1" else "c")
        sets[v] = snapshot(d)
    build(V1, out, "--target", "all")
    problems, looks, vanished = [], [0], [0]
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                problems.append("the output directory was missing")
                continue
            try:
                names = sorted(os.listdir(fd))
                got = {}
                for f in ("m.h", "m.c", "m.json"):
                    g = os.open(f, os.O_RDONLY, dir_fd=fd)
                    got[f] = os.read(g, 1 << 20)
                    os.close(g)
            except FileNotFoundError:
                # This look held a directory that a newer build had just replaced and
                # is deleting: its files go away, but none from another build appears.
                vanished[0] += 1
                continue
            finally:
                os.close(fd)
            looks[0] += 1
            ok = [v for v, s in sets.items()
                  if sorted(k for k in s if "/" not in k) == [n for n in names if not n.endswith(".mlpackage")]
                  and all(s[f] == got[f] for f in got)]
            if not ok:
                problems.append("a mixed directory: %s" % names)

    t = threading.Thread(target=reader)
    t.start()
    procs = [subprocess.Popen([KILN, "build", V1 if i % 2 else V2, "-o", out, "--target", "all" if i % 2 else "c"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(10)]
    rcs = [p.wait() for p in procs]
    stop.set()
    t.join()
    final = snapshot(out)
    if any(rcs):
        report("concurrent", False, "exit statuses %s" % rcs)
    elif problems:
        report("concurrent", False, "%d of %d looks: %s" % (len(problems), looks[0], problems[0]))
    elif final not in sets.values():
        report("concurrent", False, "the final directory is no single build's output")
    elif siblings(out):
        report("concurrent", False, "left behind: %s" % siblings(out))
    else:
        report("concurrent", True)
        print("  concurrent: %d consistent looks during 10 overlapping builds (%d more held a replaced directory)"
              % (looks[0], vanished[0]))


def stale_keep_foreign_leftover():
    out = os.path.join(WORK, "stale", "out")
    build(V1, out, "--target", "all", "--embed-weights")
    os.makedirs(os.path.join(out, "notes"))
    open(os.path.join(out, "README.txt"), "w").write("mine\n")
    open(os.path.join(out, "notes", "a.txt"), "w").write("also mine\n")
    build(V1, out, "--target", "c")
    names = sorted(os.listdir(out))
    want = sorted(["m.h", "m.c", "m.weights", "m.json", "README.txt", "notes"])
    report("stale", names == want, "after a C-only rebuild: %s" % names)
    report("keep", open(os.path.join(out, "README.txt")).read() == "mine\n"
           and open(os.path.join(out, "notes", "a.txt")).read() == "also mine\n", "the user's files changed")
    before = snapshot(out)
    r = build(OTHER, out, check=False)
    report("foreign", r.returncode == 1 and "holds the Kiln outputs of model 'm'" in r.stderr
           and len(r.stderr.strip().splitlines()) == 1 and snapshot(out) == before and not siblings(out),
           "exit %d: %s" % (r.returncode, r.stderr.strip()))
    junk = out + ".kiln-tmp-abc123"
    os.makedirs(os.path.join(junk, "m.mlpackage"))
    build(V1, out)
    report("leftover", not siblings(out), "left behind: %s" % siblings(out))


interrupt()
concurrent()
stale_keep_foreign_leftover()
