"""Mounts a FUSE file system at DIR that never answers, as a user's own broken mount or a network
home that stopped answering: every lookup below DIR waits (killably) until this process ends.
Root only: it calls mount(2) on /dev/fuse itself, with no libfuse. Prints "mounted" when done.

    hung-fuse.py DIR SECONDS
"""
import ctypes
import os
import sys
import time

directory, seconds = sys.argv[1], int(sys.argv[2])
fd = os.open('/dev/fuse', os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
options = f'fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other'.encode()
if libc.mount(b'hung', directory.encode(), b'fuse', 0, options) != 0:
    print('mount failed:', os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
print('mounted', flush=True)
# The kernel's INIT request is never read: until this process ends, nothing under DIR answers.
time.sleep(seconds)
