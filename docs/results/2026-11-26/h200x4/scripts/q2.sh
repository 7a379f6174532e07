#!/bin/bash
# session 9, call 2: ray part 01 and Ray's dependencies into the cache.
C=/root/rc; mkdir -p $C; cp .rwB/* $C/; ls $C | wc -l
