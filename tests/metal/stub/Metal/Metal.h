// Metal.h — stub for compile-checking runtime/metal/kiln_metal.m on Linux.
// Declares exactly the Metal API subset the runtime uses, with the signatures and
// enum values of Apple's headers (MTLDevice.h, MTLLibrary.h, MTLCommandQueue.h,
// MTLCommandBuffer.h, MTLComputeCommandEncoder.h, MTLComputePipeline.h,
// MTLBuffer.h, MTLResource.h, MTLTypes.h), macOS 11 / iOS 14 SDK level.
#ifndef KILN_STUB_METAL_H
#define KILN_STUB_METAL_H

#import <Foundation/Foundation.h>

#pragma clang assume_nonnull begin

// MTLTypes.h
typedef struct {
  NSUInteger width, height, depth;
} MTLSize;
static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
  MTLSize size = {width, height, depth};
  return size;
}

// MTLResource.h
typedef NS_OPTIONS(NSUInteger, MTLResourceOptions) {
  MTLResourceCPUCacheModeDefaultCache = 0,
  MTLResourceStorageModeShared = 0 << 4,
  MTLResourceStorageModePrivate = 2 << 4,
};

// MTLCommandBuffer.h
typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus) {
  MTLCommandBufferStatusNotEnqueued = 0,
  MTLCommandBufferStatusEnqueued = 1,
  MTLCommandBufferStatusCommitted = 2,
  MTLCommandBufferStatusScheduled = 3,
  MTLCommandBufferStatusCompleted = 4,
  MTLCommandBufferStatusError = 5,
};

@protocol MTLFunction <NSObject>
@end

@protocol MTLLibrary <NSObject>
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *_Nonnull)functionName;
@end

@protocol MTLComputePipelineState <NSObject>
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@end

@protocol MTLBuffer <NSObject>
- (void *_Nonnull)contents;
@property(readonly) NSUInteger length;
@end

@protocol MTLComputeCommandEncoder <NSObject>
- (void)setComputePipelineState:(id<MTLComputePipelineState> _Nonnull)state;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)endEncoding;
@end

@protocol MTLCommandBuffer <NSObject>
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (void)commit;
- (void)waitUntilCompleted;
@property(readonly) MTLCommandBufferStatus status;
@property(nullable, readonly) NSError *error;
@property(readonly) CFTimeInterval GPUStartTime;
@property(readonly) CFTimeInterval GPUEndTime;
@end

@protocol MTLCommandQueue <NSObject>
- (nullable id<MTLCommandBuffer>)commandBuffer;
@end

// MTLLibrary.h
@interface MTLCompileOptions : NSObject
@property(readwrite, nonatomic) BOOL fastMathEnabled;
@end

@protocol MTLDevice <NSObject>
@property(nonnull, readonly) NSString *name;
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString *_Nonnull)source
                                        options:(nullable MTLCompileOptions *)options
                                          error:(__autoreleasing NSError *_Nullable *_Nullable)error;
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL *_Nonnull)url
                                       error:(__autoreleasing NSError *_Nullable *_Nullable)error;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction> _Nonnull)computeFunction
                                                                       error:(__autoreleasing NSError *_Nullable *_Nullable)error;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytes:(const void *_Nonnull)pointer
                                      length:(NSUInteger)length
                                     options:(MTLResourceOptions)options;
@end

// MTLDevice.h
id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void);

#pragma clang assume_nonnull end

#endif
