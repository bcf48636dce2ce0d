// Foundation.h — stub for compile-checking runtime/metal/kiln_metal.m on Linux.
// Declares exactly the Foundation subset the runtime uses, with Apple's
// signatures (Foundation/NSObject.h, NSString.h, NSError.h, NSURL.h, NSArray.h),
// so `clang -fsyntax-only -x objective-c -fobjc-arc` type-checks every call.
// Anything the runtime starts using must be added here from Apple's headers.
#ifndef KILN_STUB_FOUNDATION_H
#define KILN_STUB_FOUNDATION_H

#include <stddef.h>

typedef signed char BOOL;
#define YES ((BOOL)1)
#define NO ((BOOL)0)
#define nil ((id)0)
typedef unsigned long NSUInteger;
typedef long NSInteger;
typedef double CFTimeInterval;
#define NS_ENUM(type, name) enum name : type name; enum name : type
#define NS_OPTIONS(type, name) type name; enum : type

#pragma clang assume_nonnull begin

@protocol NSObject
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)alloc;
+ (instancetype)new;
- (instancetype)init;
@end

@interface NSString : NSObject
+ (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
@property(nullable, readonly) const char *UTF8String;
@end

@interface NSError : NSObject
@property(readonly, copy) NSString * localizedDescription;
@end

@interface NSURL : NSObject
+ (NSURL *)fileURLWithPath:(NSString *)path;
@end

@interface NSMutableArray : NSObject
+ (instancetype )arrayWithCapacity:(NSUInteger)numItems;
- (void)addObject:(id )anObject;
- (id )objectAtIndexedSubscript:(NSUInteger)idx;
@end

// NSObject.h (ARC versions): move an object in and out of a C pointer.
typedef const void *CFTypeRef;
static inline CFTypeRef _Nullable CFBridgingRetain(id _Nullable X) { return (__bridge_retained CFTypeRef)X; }
static inline id _Nullable CFBridgingRelease(CFTypeRef _Nullable X) { return (__bridge_transfer id)X; }

#pragma clang assume_nonnull end

#endif
