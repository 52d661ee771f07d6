#!/usr/bin/env python3
"""Module-level import cycles of the binary crate (src/garage/src): which
top-level modules reference each other through `crate::…` paths (test
modules excluded), and the strongly connected components of that graph,
with the references that make each edge. Issue 18 asks for none among the
admin modules; this shows where they are.

usage: python3 script/import-cycles.py [DIR]   (default src/garage/src)
"""
import os
import re
import sys


base = sys.argv[1] if len(sys.argv) > 1 else "src/garage/src"
files={}
for root,_,fs in os.walk(base):
    for f in fs:
        if f.endswith('.rs'):
            p=os.path.relpath(os.path.join(root,f), base)
            mod=p[:-3].replace('/mod','').replace('/','::')
            files[mod]=open(os.path.join(base,p)).read()
def top(m): return m.split('::')[0]
edges={}
detail={}
for m,src in files.items():
    src=src.split('#[cfg(test)]')[0]
    for r in re.findall(r'crate::([a-z_]+(?:::[a-z_]+)?)',src):
        t=r.split('::')[0]
        if t!=top(m):
            edges.setdefault(top(m),set()).add(t)
            detail.setdefault((top(m),t),set()).add(m+' -> '+r)
sys.setrecursionlimit(10000)
idx={};low={};st=[];on=set();sccs=[];i=[0]
def dfs(v):
    idx[v]=low[v]=i[0];i[0]+=1;st.append(v);on.add(v)
    for w in edges.get(v,()):
        if w not in idx: dfs(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        c=[]
        while True:
            w=st.pop();on.discard(w);c.append(w)
            if w==v:break
        if len(c)>1:sccs.append(c)
for v in list(edges):
    if v not in idx: dfs(v)
print(sccs)
for c in sccs:
    for a in c:
        for b in c:
            if (a,b) in detail: print(a,'->',b,':',sorted(detail[(a,b)])[:4])
