import timeit, numpy as np
from emopipe.types import FaceRecord
L=("neutral","happy","sad","surprise","fear","disgust","anger","contempt")
rng=np.random.default_rng(0)
for k in (1,4):
    P=rng.dirichlet(np.ones(8),k); B=np.array([[10,10,50,60]]*k,np.float32); S=np.full(k,.9,np.float32)
    V=rng.normal(size=k); A=rng.normal(size=k); ids=np.arange(1,k+1)
    f=lambda: FaceRecord.for_frame(source="a",frame=3,timestamp_s=0.1,labels=L,track_ids=ids,boxes=B,scores=S,probabilities=P,valence=V,arousal=A)
    g=lambda: [FaceRecord.create(labels=L,probabilities=P[i],source="a",frame=3,timestamp_s=0.1,track_id=int(ids[i]),box=tuple(B[i]),score=float(S[i]),valence=float(V[i]),arousal=float(A[i])) for i in range(k)]
    for name,fn in (("for_frame",f),("create",g)):
        print(k,name,f"{min(timeit.repeat(fn,number=2000,repeat=5))/2000*1e6:.1f} µs")
