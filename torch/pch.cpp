// Nothing of its own: the target that owns the precompiled <torch/torch.h> that the LibTorch
// executables reuse (torch/CMakeLists.txt says why it is a target of its own).
