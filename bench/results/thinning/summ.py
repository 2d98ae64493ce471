import json,glob,os,statistics,sys
root=sys.argv[1] if len(sys.argv)>1 else 'bench/results/thinning/ab'
rows={}  # key -> {bin: [values per round]}
files={'rtt':'rtt.json','remote-rtt':'remote-rtt.json','throughput':'throughput.json','throughput-remote':'throughput-remote.json'}
def add(k,b,r,v):
    rows.setdefault(k,{}).setdefault(b,{})[r]=v
for d in sorted(glob.glob(root+'/*-*')):
    b,r=os.path.basename(d).rsplit('-',1)
    for name,f in files.items():
        p=os.path.join(d,f)
        if not os.path.exists(p): continue
        for line in open(p):
            j=json.loads(line)
            sysn=j['system']
            if name in('rtt','remote-rtt'):
                if sysn not in('tagwire','raw-futex','raw-spin','raw-udp','tagwire-via-daemon'): continue
                if j['p50_us'] is None: continue
                add(f"{name} {j['size']}B {sysn}/{j['mode']} p50 us",b,r,j['p50_us'])
                for peer,ratio in (j.get('paired') or {}).items():
                    if sysn=='tagwire': add(f"{name} {j['size']}B tagwire/{j['mode']} ÷ {peer} (paired)",b,r,ratio)
            else:
                if sysn not in('tagwire','tagwire-lossless','raw-udp'): continue
                if j['msgs_per_s'] is None: continue
                add(f"{name} {j['size']}B {sysn} msg/s",b,r,j['msgs_per_s'])
def fmt(v):
    if v>=1e6: return f"{v/1e6:.2f}M"
    if v>=1e3: return f"{v/1e3:.0f}k"
    return f"{v:.3g}"
print("| measure | before (rounds 1-4) | after (rounds 1-4) | before median | after median | after/before |")
print("|---|---|---|---|---|---|")
for k in sorted(rows):
    bb=rows[k].get('before',{}); aa=rows[k].get('after',{})
    if not bb or not aa: continue
    mb=statistics.median(bb.values()); ma=statistics.median(aa.values())
    print(f"| {k} | {', '.join(fmt(bb[r]) for r in sorted(bb))} | {', '.join(fmt(aa[r]) for r in sorted(aa))} | {fmt(mb)} | {fmt(ma)} | {ma/mb:.3f} |")
