# Random-interleaving model of the pipelined split-D consumers' synchronisation (src/cuda/sm90/fwd_splitd/
# kernel.cuh: splitd_consume_pipelined, splitd_produce<true>): the ring's full / empty barriers, named
# barriers 1, 2, 3 and the arrive / sync pairs 4 + w, checked for deadlock and for the P and row-slot
# hazards, without a device (docs/notes/splitd-sm90.md). Run: python3 tools/protocol/splitd_pipelined_sim.py
import random, sys

def producer_order(nb, A):
    order = []
    def k(n):
        for a in range(A):
            for h in range(2): order.append(('K', n, a, h))
    def v(n):
        for q in range(4):
            for w in range(2):
                for h in range(2): order.append(('V', n, q, w, h))
    k(0)
    for n in range(1, nb):
        k(n); v(n - 1)
    v(nb - 1)
    return order

def consumer_ops(w, nb, A):
    ops = []; st = {'pos': 0, 'prev': None}
    def skip():
        ops.append(('full', st['pos'])); ops.append(('rel', st['pos'])); st['pos'] += 1
    def qk_first():
        if w == 1: skip()
        ops.append(('full', st['pos'])); held = st['pos']; st['pos'] += 1
        if w == 0: skip()
        return held
    def qk_rest(held):
        for a in range(1, A):
            if w == 1: skip()
            ops.append(('full', st['pos'])); ops.append(('rel', held)); held = st['pos']; st['pos'] += 1
            if w == 0: skip()
        return held
    def block_max(n):
        ops.append(('rows_write', n)); ops.append(('sync', 1)); ops.append(('rows_read', n))
    def pvq(q, n):
        if q == 0: ops.append(('pv_begin', n))
        for ww in range(2):
            if ww != w: skip(); skip(); continue
            cur = [st['pos'], st['pos'] + 1]
            ops.append(('full', cur[0])); ops.append(('full', cur[1])); st['pos'] += 2
            if q > 0: ops.append(('rel', st['prev'][0])); ops.append(('rel', st['prev'][1]))
            st['prev'] = cur
    def pv_finish(n):
        ops.append(('pv_end', n)); ops.append(('rel', st['prev'][0])); ops.append(('rel', st['prev'][1]))
    # prologue
    h = qk_rest(qk_first()); ops.append(('rel', h)); block_max(0); ops.append(('sync', 2))
    for n in range(1, nb):
        h = qk_first(); ops.append(('store', n - 1)); ops.append(('arrive', 4 + w)); h = qk_rest(h)
        ops.append(('sync', 5 - w)); pvq(0, n - 1); ops.append(('rel', h)); block_max(n)
        for q in (1, 2, 3): pvq(q, n - 1)
        pv_finish(n - 1); ops.append(('sync', 2))
    ops.append(('store', nb - 1)); ops.append(('arrive', 4 + w)); ops.append(('sync', 5 - w))
    for q in range(4): pvq(q, nb - 1)
    pv_finish(nb - 1)
    ops.append(('rows_write', 'sum')); ops.append(('sync', 3)); ops.append(('rows_read', 'sum'))
    return ops, st['pos']

def run(nb, A, R, rng, drop=None):
    order = producer_order(nb, A)
    ops = [consumer_ops(w, nb, A) for w in (0, 1)]
    for w in (0, 1): assert ops[w][1] == len(order), (ops[w][1], len(order))
    ops = [o[0] for o in ops]
    if drop: ops = [[op for op in o if op != drop] for o in ops]
    pc = [0, 0]; filled = 0; released = {}  # pos -> set of WGs
    bar = {}  # id -> (generation, set of arrived WGs)
    waiting = [None, None]  # (id, generation) a WG waits on
    p_ver = [-1, -1]; in_pv = [None, None]; writes = [0, 0]; reads = [0, 0]  # reads[o]: of rows_(1-o)
    while True:
        choices = []
        # producer: can fill position `filled` once position filled - R was released by both
        if filled < len(order) and (filled < R or released.get(filled - R, set()) == {0, 1}):
            choices.append('P')
        for w in (0, 1):
            if pc[w] >= len(ops[w]): continue
            if waiting[w] is not None:
                i, g = waiting[w]
                if bar[i][0] > g: choices.append(w)
                continue
            op, x = ops[w][pc[w]]
            if op == 'full' and x >= filled: continue
            choices.append(w)
        if not choices:
            if pc == [len(ops[0]), len(ops[1])] and filled == len(order): return None
            return f'deadlock nb={nb} A={A} R={R} pc={pc} filled={filled} next={[ops[w][pc[w]] if pc[w] < len(ops[w]) else None for w in (0,1)]}'
        c = rng.choice(choices)
        if c == 'P':
            filled += 1; continue
        w = c
        if waiting[w] is not None:
            waiting[w] = None; pc[w] += 1; continue
        op, x = ops[w][pc[w]]
        o = 1 - w
        if op == 'rel':
            released.setdefault(x, set()).add(w)
        elif op in ('sync', 'arrive'):
            g, s = bar.setdefault(x, [0, set()])
            if w in s: return f'double arrival on barrier {x} by {w}'
            s.add(w)
            gen = g
            if len(s) == 2: bar[x] = [g + 1, set()]
            if op == 'sync':
                waiting[w] = (x, gen); continue
        elif op == 'store':
            if in_pv[o] is not None: return f'P_{w} rewritten (block {x}) while WG {o} reads it in PV {in_pv[o]}'
            p_ver[w] = x
        elif op == 'pv_begin':
            if p_ver[o] != x: return f'WG {w} PV({x}) reads P_{o} of block {p_ver[o]}'
            in_pv[w] = x
        elif op == 'pv_end':
            in_pv[w] = None
        elif op == 'rows_write':
            if reads[o] != writes[w]: return f'rows_{w} rewritten ({x}) before WG {o} read the last value'
            writes[w] += 1
        elif op == 'rows_read':
            if writes[o] != reads[w] + 1: return f'WG {w} reads rows_{o} ({x}) before it was written'
            reads[w] += 1
        pc[w] += 1
    
def main():
    rng = random.Random(1)
    bad = 0; n = 0
    for nb in (1, 2, 3, 5):
        for A in (1, 2, 5, 8, 16):
            R = 26 - A  # the deep ring's slot count for d_qk = 64 A
            for _ in range(300):
                r = run(nb, A, R, rng); n += 1
                if r: print(r); bad += 1; break
    print(f'{n} runs, {bad} failures')
    # The checker's own check: without barrier 2, or without the P hand-off, it must find a hazard.
    for drop in (('sync', 2), ('sync', 4), ('sync', 5), ('sync', 1)):
        found = next((r for r in (run(3, 2, 24, rng, drop) for _ in range(2000)) if r), None)
        print(f'without {drop}: {found}')

if __name__ == '__main__':
    main()
