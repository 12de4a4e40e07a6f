#!/usr/bin/env python3
"""Import loops between the top-level modules of each crate (issue 14's rule: no module
`use`s a module that uses it back). A module's edges are its `crate::X` references outside
comments and `#[cfg(test)] mod tests`; loops are the strongly connected components of more
than one module. Prints each loop and the count; exits 1 when there is one.

Usage: scripts/import-loops.py   (from the repository root)
"""
import os,re,sys,collections
def tops(src):
    for root,_,files in os.walk(src):
        for f in files:
            if not f.endswith('.rs'): continue
            p=os.path.join(root,f); rel=os.path.relpath(p,src)
            parts=rel[:-3].split(os.sep)
            if parts[-1]=='tests' or 'tests' in parts: continue
            top=parts[0]
            if top in ('lib','main'): continue
            yield top,p
total=0
for crate in sorted(os.listdir('crates')):
    src=f'crates/{crate}/src'
    g=collections.defaultdict(set)
    for top,p in tops(src):
        s=open(p).read()
        s=re.split(r'#\[cfg\(test\)\]\s*mod tests\s*\{',s)[0]
        s="\n".join(l for l in s.split("\n") if not l.strip().startswith("//"))
        for m in re.finditer(r'crate::([a-z_0-9]+)',s):
            if m.group(1)!=top: g[top].add(m.group(1))
        # use crate::{a, b::c}
        for m in re.finditer(r'use crate::\{([^}]*)\}',s):
            for x in re.findall(r'(?:^|,)\s*([a-z_0-9]+)',m.group(1)):
                if x!=top: g[top].add(x)
    # find cycles (SCCs > 1)
    idx={};low={};st=[];on=set();sccs=[];c=[0]
    def sc(v):
        idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
        for w in g.get(v,()):
            if w not in idx: sc(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop();on.discard(w);comp.append(w)
                if w==v:break
            if len(comp)>1: sccs.append(comp)
    for v in list(g): 
        if v not in idx: sc(v)
    for comp in sccs:
        total+=1; print(crate, 'loop among', sorted(comp))
print('loops:',total)
sys.exit(1 if total else 0)
