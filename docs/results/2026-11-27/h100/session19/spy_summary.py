import sys, re, collections
path, rate = sys.argv[1], float(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "leaf"
pat = sys.argv[4] if len(sys.argv) > 4 else "emopipe/"
threads = collections.Counter(); by = collections.defaultdict(collections.Counter)
for line in open(path):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); frames = stack.split(";")
    t = frames[0]; threads[t] += n
    if mode == "leaf":   # the deepest frame matching pat, plus the leaf
        own = [f for f in frames[1:] if pat in f]
        key = (own[-1] if own else "-") + "  <<  " + frames[-1][:90]
    elif mode == "own":
        own = [f for f in frames[1:] if pat in f]
        key = own[-1] if own else frames[-1][:100]
    elif mode.startswith("depth"):
        d = int(mode[5:]); key = ";".join(frames[1:1+d])[-250:]
    by[t][key] += n
for t, n in threads.most_common(12):
    print(f"== {t}: {n/rate:.2f} s")
    for k, m in by[t].most_common(int(sys.argv[5]) if len(sys.argv) > 5 else 12):
        print(f"   {m/rate:6.2f}  {k}")
