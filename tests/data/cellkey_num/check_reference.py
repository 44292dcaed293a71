"""Standalone cross-check of the cellKey reference data (not package code).

Re-implements cellKey 1.0.2's per-cell magnitude perturbation (flex and simple),
key rotation and p-table lookup/interpolation as documented in README.md section 3,
using only the files in this directory (ck / ck_nz and the driver values x from the
case files, p-tables from the CSVs), and compares with cellKey's output.
Run: python3 tests/data/cellkey_num/check_reference.py   (needs pandas, numpy)
Expected: every case line ends with "bad 0 keybad 0" and exact == cells.
"""
import pandas as pd, numpy as np, json, math, sys
import os
D=os.path.dirname(os.path.abspath(__file__))+'/'
man=json.load(open(D+'cases.json'))
pt={'all':pd.read_csv(D+'ptable_nums_all.csv'),'small_cells':pd.read_csv(D+'ptable_nums_small_cells.csv'),
    'even':pd.read_csv(D+'ptable_nums_even.csv'),'odd':pd.read_csv(D+'ptable_nums_odd.csv')}
pt['small_cells']['type']='small_cells'
def rchar(x):
    # R 4.2 as.character(double): 15 significant digits, fixed vs sci by width
    if x==0: return '0'
    s=('%.15g'%x)
    if 'e' in s:
        m,e=s.split('e'); ex=int(e)
        sci=m+'e'+('-' if ex<0 else '+')+('%02d'%abs(ex))
        digits=m.replace('.','').replace('-','')
        fixed='0.'+'0'*(-ex-1)+digits if ex<0 else None
        if fixed is not None and len(fixed)<=len(sci): return fixed
        return sci
    return s
def scramble(ck,k,same):
    s=rchar(ck); beg=s[:2]; L=len(s); res=[None]*k
    if not same:
        ss=s[3:L]; res[0]=beg+(ss if ss!='' else '0')+s[2:3]
    else:
        res[0]=s
        if k==1: return [ck]   # top_k == 1: res stays numeric, key not rounded
    for i in range(1,k):
        p=res[i-1]; res[i]=beg+p[3:L]+p[2:3]
    return [float(r) for r in res]
def lookup_row(tab,i,ck):
    r=tab[(tab.i==i)&(ck<tab.p_int_ub)]
    return r.v.iloc[0]
def lookup_v(ck,a,lk):
    if ck==0: return 0.0
    tab=pt[lk]; d=tab.i.max(); a=min(a,d)
    poss=sorted(tab.i.unique())
    if a in poss: return lookup_row(tab,a,ck)
    a0=max(p for p in poss if p<a); a1=min(p for p in poss if p>a)
    lam=(a-a0)/(a1-a0)
    return (1-lam)*lookup_row(tab,a0,ck)+lam*lookup_row(tab,a1,ck)
def m_flex(x,ps,pl,fp,q):
    f1=((ps*x)-(pl*fp))/(pl*fp); f2=((2*fp)/(fp+x))**q
    return pl*(1+(f1*f2))
def perturb(cv,xs,cks,lks,prot,P,flex):
    if flex and (cks[0]==0 or cv==0): return [0.0]
    if (not flex) and cks[0]==0: return [0.0]
    mp=P['mult_params']; zs=P['derived']['zs']; mu=P['mu_c'] if prot else 0.0
    eps=mp['epsilon'] if isinstance(mp['epsilon'],list) else [mp['epsilon']]
    psm=mp['p_small'] if flex else mp['p']
    xo=cv; sxo=1 if xo>=0 else -1; out=[]
    for j,xj in enumerate(xs):
        zero=False; lk=lks[j] if j<len(lks) else None
        if abs(xj)<zs: xd=1.0; lk='small_cells'
        elif flex:
            if abs(xj)<mp['fp']: xd=xj*psm
            else: xd=xj*m_flex(abs(xj),psm,mp['p_large'],mp['fp'],mp['q'])*eps[j]
        else: xd=xj*psm*eps[j]
        if abs(xo)<abs(xd):
            xd=xo; xj=xo/(psm*eps[j])
            if abs(xj)<zs:
                xd=1.0; lk='small_cells'
                if (j>0 if flex else True): zero=True
        if not zero:
            a=abs(xo/xd) if xd!=0 else math.inf
            v=lookup_v(cks[j],a,lk)
            sv=1 if v>=0 else -1
            xh=sxo*abs(xd)*(sv*(mu+abs(v)))
            if sv==-1:
                if sxo==-1: xh=min(xh,-xo)
                elif sxo>sv: xh=max(xh,-xo)
        else: xh=0.0
        out.append(xh); xo=xo+xh; sxo=1 if xo>=0 else -1
    return out
tot=0; bad=0; keybad=0; exact=0
for c in man['cases']:
    if not c.get('files'): continue
    comp=pd.read_csv(D+c['files']['components'],dtype={'strID':str},keep_default_na=False,na_values=['NA'])
    nt=pd.read_csv(D+c['files']['numtab'],dtype={'strID':str},keep_default_na=False,na_values=['NA'])
    for P in c['params']:
        v=P['vname']; flex=P['mult_params_class']=='params_m_flex'
        cc=comp[comp.vname==v]; n=nt[nt.vname==v].set_index('strID')
        for sid,g in cc.groupby('strID',sort=False):
            g=g.sort_values('j'); k=int(g.n_x.iloc[0])
            xs=list(g.x[:k]) ; cv=g.cv.iloc[0]; prot=bool(g.prot_req.iloc[0])
            base=n.loc[sid,'ck_nz'] if not P['use_zero_rkeys'] else n.loc[sid,'ck']
            cks=scramble(base,P['top_k'],P['same_key'])
            if not np.array_equal(np.array(cks[:len(g)]),g.ck_j.values[:P['top_k']]): keybad+=1
            lks=list(g.lookup_in)
            xh=perturb(cv,xs,cks,lks,prot,P,flex)
            ref=sum(x for x in g.x_hat if not pd.isna(x))
            tot+=1
            exact+= sum(xh)==ref
            if not (abs(sum(xh)-ref)<=1e-9*max(1,abs(cv))):
                bad+=1
                if bad<6: print('MISMATCH',c['id'],v,sid,cv,xs,cks,xh,list(g.x_hat))
    print(c['id'],'cells',tot,'bad',bad,'keybad',keybad,'exact',exact); sys.stdout.flush()
