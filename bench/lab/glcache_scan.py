"""Looks for machine code in the NVIDIA driver's shader disk cache after a wgpu run (lab; see gemm_lab.py).

    __GL_SHADER_DISK_CACHE_PATH=/tmp/glc python3 bench/matmul_gpu.py ...; python3 bench/lab/glcache_scan.py /tmp/glc OUT

Lists the cache's files, and for every ELF image found inside one writes it out and asks cuobjdump / nvdisasm
for its SASS and resource usage.
"""
import subprocess
import sys
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
found = 0
for f in sorted(p for p in root.rglob("*") if p.is_file()):
    data = f.read_bytes()
    print(f"{f} {len(data)} bytes, head {data[:16].hex()}")
    at = data.find(b"\x7fELF")
    while at >= 0 and found < 40:
        found += 1
        elf = out / f"img{found}.elf"
        elf.write_bytes(data[at:])
        for tool in (["cuobjdump", "-res-usage", "-sass", str(elf)], ["nvdisasm", "-c", str(elf)]):
            r = subprocess.run(tool, capture_output=True, text=True)
            text = r.stdout + r.stderr
            (out / f"img{found}.{tool[0]}.txt").write_text(text)
            print(f"  ELF at {at}: {tool[0]} -> {len(text)} chars; {text[:300]!r}")
        at = data.find(b"\x7fELF", at + 4)
print("ELF images:", found)
