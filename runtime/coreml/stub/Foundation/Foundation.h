/*
 * Foundation/Foundation.h — STUB for compile-checking runtime/coreml on Linux.
 *
 * Only the part of Apple's Foundation API that kiln_coreml.m uses, declared
 * with Apple's documented signatures and availability (nullability annotations dropped), so that
 * `clang -fsyntax-only -x objective-c -fobjc-arc -fblocks` can check the wrapper
 * without a Mac. On Apple platforms the real SDK header is found first; on Linux
 * the only program built against it is the mock test (tests/coreml/mock/), which
 * links the wrapper with a fake implementation written for that test.
 */
#ifndef KILN_STUB_FOUNDATION_H
#define KILN_STUB_FOUNDATION_H

#include <stddef.h>
#include <stdint.h>

typedef long NSInteger;
typedef unsigned long NSUInteger;
typedef signed char BOOL;
#define nil ((void *)0)
#define YES ((BOOL)1)
#define NO ((BOOL)0)
#define NS_ENUM(type, name) enum name : type name; enum name : type
#define NS_OPTIONS(type, name) enum name : type name; enum name : type
#define NS_NOESCAPE __attribute__((noescape))
/* Availability as Apple's SDK marks it, so that a check compiled for an older macOS
 * (-target ...-apple-macos13 -Wunguarded-availability) flags a newer API used outside
 * @available. */
#define macos(v) availability(macos, introduced = v)
#define ios(v) availability(ios, introduced = v)
#define API_AVAILABLE(...) __attribute__((__VA_ARGS__))

@class NSArray<ObjectType>;

@protocol NSObject
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)alloc;
+ (instancetype)new;
- (instancetype)init;
@end

@protocol NSCopying
@end
@protocol NSFastEnumeration
@end

@interface NSString : NSObject <NSCopying>
+ (instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
+ (instancetype)stringWithFormat:(NSString *)format, ...;
@property (readonly) NSUInteger length;
@property (readonly) const char *UTF8String;
- (NSString *)stringByAppendingPathComponent:(NSString *)str;
- (NSString *)stringByAppendingString:(NSString *)aString;
- (NSArray<NSString *> *)componentsSeparatedByString:(NSString *)separator;
- (BOOL)isEqualToString:(NSString *)aString;
@end

@interface NSConstantString : NSString
@end

@interface NSNumber : NSObject <NSCopying>
+ (NSNumber *)numberWithLongLong:(long long)value;
@property (readonly) long long longLongValue;
@end

@interface NSArray<__covariant ObjectType> : NSObject <NSCopying, NSFastEnumeration>
@property (readonly) NSUInteger count;
- (ObjectType)objectAtIndex:(NSUInteger)index;
@property (readonly) ObjectType firstObject;
@end

@interface NSMutableArray<ObjectType> : NSArray<ObjectType>
+ (instancetype)arrayWithCapacity:(NSUInteger)numItems;
- (void)addObject:(ObjectType)anObject;
@end

@interface NSDictionary<__covariant KeyType, __covariant ObjectType> : NSObject <NSCopying, NSFastEnumeration>
- (ObjectType)objectForKey:(KeyType)aKey;
@end

@interface NSMutableDictionary<KeyType, ObjectType> : NSDictionary<KeyType, ObjectType>
+ (instancetype)dictionaryWithCapacity:(NSUInteger)numItems;
- (void)setObject:(ObjectType)anObject forKey:(KeyType)aKey;
@end

@interface NSSet<__covariant ObjectType> : NSObject <NSCopying, NSFastEnumeration>
@end

@interface NSError : NSObject <NSCopying>
@property (readonly, copy) NSString *localizedDescription;
@end

typedef NS_OPTIONS(NSUInteger, NSDataReadingOptions) {
  NSDataReadingMappedIfSafe = 1UL << 0,
};

@interface NSData : NSObject <NSCopying>
+ (instancetype)dataWithContentsOfFile:(NSString *)path options:(NSDataReadingOptions)readOptionsMask error:(NSError **)errorPtr;
@property (readonly) const void *bytes;
@property (readonly) NSUInteger length;
@end

@interface NSURL : NSObject <NSCopying>
+ (NSURL *)fileURLWithPath:(NSString *)path;
@property (readonly, copy) NSString *path;
@end

@interface NSFileManager : NSObject
@property (class, readonly, strong) NSFileManager *defaultManager;
- (BOOL)fileExistsAtPath:(NSString *)path;
- (BOOL)createDirectoryAtPath:(NSString *)path withIntermediateDirectories:(BOOL)createIntermediates
                   attributes:(NSDictionary<NSString *, id> *)attributes error:(NSError **)error;
- (BOOL)moveItemAtURL:(NSURL *)srcURL toURL:(NSURL *)dstURL error:(NSError **)error;
- (BOOL)removeItemAtURL:(NSURL *)URL error:(NSError **)error;
@end

typedef NS_ENUM(NSUInteger, NSSearchPathDirectory) {
  NSCachesDirectory = 13,
};
typedef NS_OPTIONS(NSUInteger, NSSearchPathDomainMask) {
  NSUserDomainMask = 1,
};
NSArray<NSString *> *NSSearchPathForDirectoriesInDomains(NSSearchPathDirectory directory, NSSearchPathDomainMask domainMask, BOOL expandTilde);

#endif
