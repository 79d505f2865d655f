target triple = "amdgcn-amd-amdhsa"

@tile = internal addrspace(3) global [256 x float] undef, align 4

define amdgpu_kernel void @scale_kernel(float addrspace(1)* %out, float addrspace(1)* %in, float %f) {
entry:
  %id = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr float, float addrspace(1)* %in, i32 %id
  %v = load float, float addrspace(1)* %p
  %m = fmul float %v, %f
  %q = getelementptr float, float addrspace(1)* %out, i32 %id
  store float %m, float addrspace(1)* %q
  ret void
}

define amdgpu_kernel void @tile_kernel(float addrspace(1)* %out, float addrspace(1)* %in) {
entry:
  %local = alloca [64 x float], align 4, addrspace(5)
  %id = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr float, float addrspace(1)* %in, i32 %id
  %v = load float, float addrspace(1)* %p
  %lp = getelementptr [64 x float], [64 x float] addrspace(5)* %local, i32 0, i32 %id
  store volatile float %v, float addrspace(5)* %lp
  %t = getelementptr [256 x float], [256 x float] addrspace(3)* @tile, i32 0, i32 %id
  store float %v, float addrspace(3)* %t
  call void @llvm.amdgcn.s.barrier()
  %r = load volatile float, float addrspace(5)* %lp
  %u = load float, float addrspace(3)* %t
  %s = fadd float %r, %u
  %q = getelementptr float, float addrspace(1)* %out, i32 %id
  store float %s, float addrspace(1)* %q
  ret void
}

declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
