/*
 * CoreML/CoreML.h — STUB for compile-checking runtime/coreml on Linux.
 *
 * The part of Apple's Core ML API that kiln_coreml.m uses, with Apple's
 * documented signatures and enum values (nullability annotations dropped):
 * MLModel, MLModelConfiguration, MLComputeUnits, MLModelDescription,
 * MLFeatureDescription, MLMultiArrayConstraint, MLMultiArray(DataType),
 * MLFeatureValue, MLFeatureProvider, MLDictionaryFeatureProvider, and what iOS 18 /
 * macOS 15 added for stateful and multifunction models (MLState, MLStateConstraint,
 * MLModelConfiguration.functionName, -[MLModel newState],
 * predictionFromFeatures:usingState:error:). On Linux the only program built
 * against it is the mock test (tests/coreml/mock/), with a fake implementation.
 */
#ifndef KILN_STUB_COREML_H
#define KILN_STUB_COREML_H

#import <Foundation/Foundation.h>

typedef NS_ENUM(NSInteger, MLComputeUnits) {
  MLComputeUnitsCPUOnly = 0,
  MLComputeUnitsCPUAndGPU = 1,
  MLComputeUnitsAll = 2,
  MLComputeUnitsCPUAndNeuralEngine API_AVAILABLE(macos(13.0), ios(16.0)) = 3,
};

typedef NS_ENUM(NSInteger, MLMultiArrayDataType) {
  MLMultiArrayDataTypeDouble = 0x10000 | 64,
  MLMultiArrayDataTypeFloat64 = 0x10000 | 64,
  MLMultiArrayDataTypeFloat32 = 0x10000 | 32,
  MLMultiArrayDataTypeFloat16 API_AVAILABLE(macos(12.0), ios(15.0)) = 0x10000 | 16,
  MLMultiArrayDataTypeFloat = 0x10000 | 32,
  MLMultiArrayDataTypeInt32 = 0x20000 | 32,
};

typedef NSString *MLModelMetadataKey;
extern MLModelMetadataKey const MLModelCreatorDefinedKey;

@interface MLMultiArrayConstraint : NSObject
@property (readonly, nonatomic) NSArray<NSNumber *> *shape;
@property (readonly, nonatomic) MLMultiArrayDataType dataType;
@end

@interface MLStateConstraint : NSObject
@property (readonly, nonatomic) NSArray<NSNumber *> *bufferShape API_AVAILABLE(macos(15.0), ios(18.0));
@property (readonly, nonatomic) MLMultiArrayDataType dataType API_AVAILABLE(macos(15.0), ios(18.0));
@end

@interface MLFeatureDescription : NSObject <NSCopying>
@property (readonly, nonatomic, copy) NSString *name;
@property (readonly, nonatomic) MLMultiArrayConstraint *multiArrayConstraint;
@property (readonly, nonatomic) MLStateConstraint *stateConstraint API_AVAILABLE(macos(15.0), ios(18.0));
@end

@interface MLModelDescription : NSObject
@property (readonly, nonatomic) NSDictionary<NSString *, MLFeatureDescription *> *inputDescriptionsByName;
@property (readonly, nonatomic) NSDictionary<NSString *, MLFeatureDescription *> *outputDescriptionsByName;
@property (readonly, nonatomic) NSDictionary<NSString *, MLFeatureDescription *> *stateDescriptionsByName
    API_AVAILABLE(macos(15.0), ios(18.0));
@property (readonly, nonatomic) NSDictionary<MLModelMetadataKey, id> *metadata;
@end

@interface MLMultiArray : NSObject
- (instancetype)initWithDataPointer:(void *)dataPointer
                              shape:(NSArray<NSNumber *> *)shape
                           dataType:(MLMultiArrayDataType)dataType
                            strides:(NSArray<NSNumber *> *)strides
                        deallocator:(void (^)(void *bytes))deallocator
                              error:(NSError **)error;
@property (readonly, nonatomic) void *dataPointer;
@property (readonly, nonatomic) MLMultiArrayDataType dataType;
@property (readonly, nonatomic) NSArray<NSNumber *> *shape;
@property (readonly, nonatomic) NSArray<NSNumber *> *strides;
@property (readonly, nonatomic) NSInteger count;
- (void)getBytesWithHandler:(void (NS_NOESCAPE ^)(const void *bytes, NSInteger size))handler
    API_AVAILABLE(macos(12.3), ios(15.4));
- (void)getMutableBytesWithHandler:(void (NS_NOESCAPE ^)(void *mutableBytes, NSInteger size, NSArray<NSNumber *> *strides))handler
    API_AVAILABLE(macos(12.3), ios(15.4));
@end

@interface MLState : NSObject
- (void)getMultiArrayForStateNamed:(NSString *)stateName handler:(void (NS_NOESCAPE ^)(MLMultiArray *buffer))handler
    API_AVAILABLE(macos(15.0), ios(18.0));
@end

@interface MLFeatureValue : NSObject <NSCopying>
+ (instancetype)featureValueWithMultiArray:(MLMultiArray *)value;
@property (readonly, nonatomic) MLMultiArray *multiArrayValue;
@end

@protocol MLFeatureProvider
@property (readonly, nonatomic) NSSet<NSString *> *featureNames;
- (MLFeatureValue *)featureValueForName:(NSString *)featureName;
@end

@interface MLDictionaryFeatureProvider : NSObject <MLFeatureProvider>
- (instancetype)initWithDictionary:(NSDictionary<NSString *, id> *)dictionary error:(NSError **)error;
@end

@interface MLModelConfiguration : NSObject <NSCopying>
@property (readwrite) MLComputeUnits computeUnits;
@property (readwrite, nonatomic, copy) NSString *functionName API_AVAILABLE(macos(15.0), ios(18.0));
@end

@interface MLModel : NSObject
@property (readonly, nonatomic) MLModelDescription *modelDescription;
+ (NSURL *)compileModelAtURL:(NSURL *)modelURL error:(NSError **)error;
+ (instancetype)modelWithContentsOfURL:(NSURL *)url configuration:(MLModelConfiguration *)configuration
                                 error:(NSError **)error;
- (id<MLFeatureProvider>)predictionFromFeatures:(id<MLFeatureProvider>)input error:(NSError **)error;
- (MLState *)newState API_AVAILABLE(macos(15.0), ios(18.0));
- (id<MLFeatureProvider>)predictionFromFeatures:(id<MLFeatureProvider>)inputFeatures usingState:(MLState *)state
                                          error:(NSError **)error API_AVAILABLE(macos(15.0), ios(18.0));
@end

#endif
