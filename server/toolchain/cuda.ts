// The CUDA toolkit a native CUDA build compiles with: the system's (nvcc on PATH, CUDA_HOME,
// /usr/local/cuda) or, where none exists, CUDA 13 installed from PyPI wheels into the cache.
// The wheels make one toolkit tree (nvidia/cu13: bin, include, lib, nvvm) that lacks two
// things CMake expects: unversioned .so links and the driver stub libcuda.so. The links are
// made here; without a driver library, ggml's virtual-memory pool (the one user of the
// driver API) is compiled out.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { buildDir } from "../process/paths.ts";
import { runCommand } from "../process/run.ts";
import { progress } from "../log/progress.ts";

/** The wheels, pinned: nvcc, cudafe++, fatbinary, nvlink, ptxas; cicc; headers; cudart; cuBLAS. */
export const CUDA_WHEELS = [
  "nvidia-cuda-nvcc==13.5.37",
  "nvidia-nvvm==13.5.37",
  "nvidia-cuda-crt==13.5.37",
  "nvidia-cuda-runtime==13.5.37",
  "nvidia-cuda-cccl==13.3.5.0.6",
  "nvidia-cublas==13.10.0.20",
] as const;

/** Hopper (H100/H200) when no GPU is here to ask. */
export const DEFAULT_CUDA_ARCH = "90";

export interface CudaToolkit {
  readonly source: "system" | "pypi";
  readonly root: string;
  readonly nvcc: string;
  /** What the build key records: which toolkit and which GPU architecture. */
  readonly arch: string;
  readonly cmakeArgs: readonly string[];
}

function which(cmd: string): string | undefined {
  try {
    const r = new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`], stdout: "piped", stderr: "null" })
      .outputSync();
    const p = new TextDecoder().decode(r.stdout).trim();
    return r.success && p ? p : undefined;
  } catch {
    return undefined;
  }
}

function systemNvcc(): string | undefined {
  const home = Deno.env.get("CUDA_HOME") ?? Deno.env.get("CUDA_PATH");
  for (const p of [home && join(home, "bin", "nvcc"), which("nvcc"), "/usr/local/cuda/bin/nvcc"]) {
    if (p && existsSync(p)) return Deno.realPathSync(p);
  }
  return undefined;
}

/** The GPU architecture: --cuda-arch / STRATA_CUDA_ARCH, else this machine's first GPU, else Hopper. */
export function cudaArch(): string {
  const set = Deno.env.get("STRATA_CUDA_ARCH");
  if (set) return set;
  const smi = which("nvidia-smi");
  if (smi) {
    const r = new Deno.Command(smi, {
      args: ["--query-gpu=compute_cap", "--format=csv,noheader"],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    const cap = new TextDecoder().decode(r.stdout).split("\n")[0].trim();
    if (r.success && /^\d+\.\d+$/.test(cap)) return cap.replace(".", "");
  }
  return DEFAULT_CUDA_ARCH;
}

const pypiRoot = () => join(buildDir("cuda", "pypi-13.5"), "nvidia", "cu13");

async function installWheels(): Promise<string> {
  const target = buildDir("cuda", "pypi-13.5");
  const root = pypiRoot();
  if (existsSync(join(root, "bin", "nvcc")) && existsSync(join(root, ".strata-complete"))) return root;
  const bar = progress("cuda: installing the CUDA 13 toolkit from PyPI (first use; ≈ 600 MB)", 1);
  await runCommand("python3", [
    "-m",
    "pip",
    "install",
    "--quiet",
    "--no-deps",
    "--only-binary=:all:",
    "--upgrade",
    "--target",
    target,
    ...CUDA_WHEELS,
  ]);
  bar.finish("done");
  Deno.writeTextFileSync(join(root, ".strata-complete"), CUDA_WHEELS.join("\n"));
  return root;
}

/** Finds `name` (an .so, possibly only versioned) in the dirs; returns the real file. */
function findLib(dirs: readonly string[], name: string): string | undefined {
  for (const d of dirs) {
    if (!existsSync(d)) continue;
    if (existsSync(join(d, name))) return join(d, name);
    const versioned = [...Deno.readDirSync(d)].map((e) => e.name).filter((n) => n.startsWith(`${name}.`))
      .sort();
    if (versioned.length) return join(d, versioned[0]);
  }
  return undefined;
}

const libDirs = (root: string) => [
  join(root, "lib64"),
  join(root, "lib"),
  join(root, "targets", "x86_64-linux", "lib"),
];

/** cuBLAS from the Python packages (a system toolkit installed without it, e.g. beside PyTorch). */
function pythonCublasDirs(): string[] {
  try {
    const r = new Deno.Command("python3", {
      args: ["-c", "import nvidia, sys; print('\\n'.join(nvidia.__path__))"],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    const roots = new TextDecoder().decode(r.stdout).split("\n").filter(Boolean);
    return roots.flatMap((p) => ["cu13/lib", "cublas/lib", "cu12/lib"].map((s) => join(p, s)));
  } catch {
    return [];
  }
}

/** A folder of unversioned links (CMake's find_library wants libX.so). */
function linkDir(name: string, libs: Record<string, string>): string {
  const dir = buildDir("cuda", name);
  Deno.mkdirSync(dir, { recursive: true });
  for (const [link, target] of Object.entries(libs)) {
    const at = join(dir, link);
    try {
      Deno.removeSync(at);
    } catch { /* absent */ }
    Deno.symlinkSync(target, at);
  }
  return dir;
}

/** What a CUDA build's key records, known without installing anything. */
export function cudaKeyFacts(): { toolkit: string; arch: string } {
  return { toolkit: systemNvcc() ?? `pypi:${CUDA_WHEELS.join(",")}`, arch: cudaArch() };
}

/** The toolkit to build with, installing the PyPI one when the system has none. */
export async function cudaToolkit(): Promise<CudaToolkit> {
  const sys = systemNvcc();
  const root = sys ? dirname(dirname(sys)) : await installWheels();
  const nvcc = sys ?? join(root, "bin", "nvcc");
  const arch = cudaArch();
  const args = [
    "-DGGML_CUDA=ON",
    `-DCMAKE_CUDA_COMPILER=${nvcc}`,
    `-DCUDAToolkit_ROOT=${root}`,
    `-DCMAKE_CUDA_ARCHITECTURES=${arch}`,
  ];
  const dirs = libDirs(root);
  const rpath: string[] = [];

  const cudart = findLib(dirs, "libcudart.so");
  let cublas = findLib(dirs, "libcublas.so");
  let cublasLt = findLib(dirs, "libcublasLt.so");
  let cublasInclude = existsSync(join(root, "include", "cublas_v2.h")) ? undefined : "";
  if (!cublas || !cublasLt) {
    const py = pythonCublasDirs();
    cublas = findLib(py, "libcublas.so");
    cublasLt = findLib(py, "libcublasLt.so");
    if (!cublas || !cublasLt) {
      throw new Error(
        `cuda: the toolkit at ${root} has no cuBLAS, and no Python package provides it ` +
          `(pip install nvidia-cublas, or a toolkit with libcublas)`,
      );
    }
    cublasInclude = join(dirname(dirname(cublas)), "include");
  }
  if (!cudart) throw new Error(`cuda: the toolkit at ${root} has no libcudart`);
  // the wheels and pip's cuBLAS carry only versioned names
  const links = linkDir(`links-${arch}-${sys ? "system" : "pypi"}`, {
    "libcudart.so": cudart,
    "libcublas.so": cublas,
    "libcublasLt.so": cublasLt,
  });
  args.push(
    // FindCUDAToolkit's own names for the three (CMake 3.25: CUDA_CUDART, then CUDA_<lib>_LIBRARY)
    `-DCUDA_CUDART=${join(links, "libcudart.so")}`,
    `-DCUDA_cudart_LIBRARY=${join(links, "libcudart.so")}`,
    `-DCUDA_cublas_LIBRARY=${join(links, "libcublas.so")}`,
    `-DCUDA_cublasLt_LIBRARY=${join(links, "libcublasLt.so")}`,
  );
  for (const lib of [cudart, cublas, cublasLt]) {
    const d = dirname(lib);
    if (!rpath.includes(d)) rpath.push(d);
  }
  if (cublasInclude) {
    args.push(`-DCMAKE_CUDA_FLAGS=-I${cublasInclude}`, `-DCMAKE_CXX_FLAGS=-I${cublasInclude}`);
  }
  // the driver API: the toolkit's stub, else the installed driver, else build without it
  const stub = findLib([...dirs.map((d) => join(d, "stubs")), ...dirs], "libcuda.so");
  const driver = stub ?? ldconfigHas("libcuda.so");
  if (!driver) args.push("-DGGML_CUDA_NO_VMM=ON");
  else if (!stub || !stub.endsWith("libcuda.so")) {
    args.push(
      `-DCUDA_cuda_driver_LIBRARY=${join(linkDir(`driver-${arch}`, { "libcuda.so": driver }), "libcuda.so")}`,
    );
  }
  // the library finds cudart and cuBLAS where it was built against them (the wheels live in the cache)
  args.push(`-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath,${rpath.join(":")}`);
  return { source: sys ? "system" : "pypi", root, nvcc, arch, cmakeArgs: args };
}

function ldconfigHas(name: string): string | undefined {
  try {
    const r = new Deno.Command("ldconfig", { args: ["-p"], stdout: "piped", stderr: "null" }).outputSync();
    const line = new TextDecoder().decode(r.stdout).split("\n").find((l) => l.trim().startsWith(name));
    return line?.split("=>")[1]?.trim();
  } catch {
    return undefined;
  }
}
