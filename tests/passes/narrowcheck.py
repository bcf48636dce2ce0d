"""narrowcheck.py — pass_narrow changes how much a model computes, never its bits.

  /usr/bin/python3 tests/passes/narrowcheck.py KILN WORKDIR SCRIPT...

For each (stateless) model script: build the C target as is and with KILN_NONARROW=1 (the
pass off), run both on the same seeded inputs (fusecheck.py's driver), and print
  PASS narrow_<m>_same   every output is the same bytes
  PASS narrow_<m>_less   the narrowed build's kernels write fewer bytes (the pass did narrow:
                         otherwise the first check would hold trivially)
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusecheck  # noqa: E402  (build, inputs, outputs, report)


def written(meta):
    """The bytes a build's kernels write a call (their outputs): less where the pass narrowed
    something (the arena need not shrink: the plan packs values its own way)."""
    return sum(o["bytes"] for k in fusecheck.kernels_of(meta) for o in k["outputs"])


def check(kiln, work, script):
    m = os.path.basename(script)[:-4]
    d = os.path.join(work, m)
    narrowed, nexe = fusecheck.build(kiln, script, os.path.join(d, "narrow"), [])
    os.environ["KILN_NONARROW"] = "1"
    try:
        whole, wexe = fusecheck.build(kiln, script, os.path.join(d, "whole"), [])
    finally:
        del os.environ["KILN_NONARROW"]
    files = fusecheck.inputs(narrowed, d)
    no = fusecheck.outputs(nexe, os.path.join(d, "narrow", m + ".weights"), files, narrowed, os.path.join(d, "no"))
    wo = fusecheck.outputs(wexe, os.path.join(d, "whole", m + ".weights"), files, whole, os.path.join(d, "wo"))
    differ = [n for n in no if no[n].tobytes() != wo[n].tobytes()]
    fusecheck.report(not differ, "narrow_%s_same" % m, "outputs not the same bytes: " + ", ".join(differ))
    nb, wb = written(narrowed), written(whole)
    fusecheck.report(nb < wb, "narrow_%s_less" % m, "kernels write %d bytes narrowed, %d whole" % (nb, wb))


def main():
    kiln, work = sys.argv[1], sys.argv[2]
    for script in sys.argv[3:]:
        try:
            check(kiln, work, script)
        except Exception as e:  # a failed build or run is a failed check, with its message
            fusecheck.report(False, "narrow_%s" % os.path.basename(script)[:-4], str(e))


main()
