#!/bin/bash
# session 9, call 1: ray part 00 into the cache; what the host is.
C=/root/rc; mkdir -p $C; cp .rwA/ray.part00 $C/
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; nproc; free -g | head -2
nvidia-smi topo -m 2>/dev/null | head -8
