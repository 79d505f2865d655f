/*******************************************************************************
 * MIT License
 * Copyright (c) 2017 Advanced Micro Devices, Inc.
 *******************************************************************************/
#ifndef MIOPEN_VERSION_H_
#define MIOPEN_VERSION_H_

// clang-format off
#define MIOPEN_VERSION_MAJOR 3
#define MIOPEN_VERSION_MINOR 2
#define MIOPEN_VERSION_PATCH 0
#define MIOPEN_VERSION_TWEAK 0a1a6b4e
// clang-format on

#endif // MIOPEN_VERSION_H_
