// JNI glue from the org.dwell Java classes (java/org/dwell) to the C API
// (dwell.h). Handles are the C API's pointers carried in Java longs; every
// failed C call becomes an org.dwell.DwellException with its code and
// message.
#include <jni.h>

#include <string>

#include "dwell.h"

namespace {

template <class T>
T* from_handle(jlong h) {
    return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}

template <class T>
jlong to_handle(T* p) {
    return static_cast<jlong>(reinterpret_cast<intptr_t>(p));
}

void throw_dwell(JNIEnv* env, const dwell_error& e) {
    jclass cls = env->FindClass("org/dwell/DwellException");
    if (!cls) return;  // NoClassDefFoundError is pending
    jmethodID ctor = env->GetMethodID(cls, "<init>", "(ILjava/lang/String;)V");
    jstring msg = env->NewStringUTF(e.message);
    auto ex = static_cast<jthrowable>(env->NewObject(cls, ctor, static_cast<jint>(e.code), msg));
    if (ex) env->Throw(ex);
}

// A Java string as UTF-8 (JNI's GetStringUTFChars gives modified UTF-8,
// which differs for characters outside the BMP).
std::string utf8(JNIEnv* env, jstring s) {
    if (!s) return {};
    jclass string_class = env->FindClass("java/lang/String");
    jmethodID get_bytes = env->GetMethodID(string_class, "getBytes", "(Ljava/lang/String;)[B");
    jstring charset = env->NewStringUTF("UTF-8");
    auto bytes = static_cast<jbyteArray>(env->CallObjectMethod(s, get_bytes, charset));
    if (!bytes) return {};
    const jsize n = env->GetArrayLength(bytes);
    std::string out(static_cast<size_t>(n), '\0');
    env->GetByteArrayRegion(bytes, 0, n, reinterpret_cast<jbyte*>(out.data()));
    env->DeleteLocalRef(bytes);
    env->DeleteLocalRef(charset);
    return out;
}

jstring java_string(JNIEnv* env, const char* text, size_t len) {
    jclass string_class = env->FindClass("java/lang/String");
    jmethodID ctor = env->GetMethodID(string_class, "<init>", "([BLjava/lang/String;)V");
    jbyteArray bytes = env->NewByteArray(static_cast<jsize>(len));
    env->SetByteArrayRegion(bytes, 0, static_cast<jsize>(len),
                            reinterpret_cast<const jbyte*>(text));
    jstring charset = env->NewStringUTF("UTF-8");
    auto s = static_cast<jstring>(env->NewObject(string_class, ctor, bytes, charset));
    env->DeleteLocalRef(bytes);
    env->DeleteLocalRef(charset);
    return s;
}

struct CallbackContext {
    JNIEnv* env;
    jobject callback;
    jmethodID on_token;
};

int on_token(void* user, int32_t token, const char* text, size_t len) {
    auto* c = static_cast<CallbackContext*>(user);
    if (!c->callback) return 0;
    jstring s = java_string(c->env, text, len);
    const jboolean go = c->env->CallBooleanMethod(c->callback, c->on_token, token, s);
    c->env->DeleteLocalRef(s);
    // A Java exception in the callback stops the reply; it is rethrown.
    return c->env->ExceptionCheck() || !go ? 1 : 0;
}

}  // namespace

extern "C" {

JNIEXPORT jint JNICALL Java_org_dwell_Dwell_nativeVersion(JNIEnv*, jclass) {
    return static_cast<jint>(dwell_capi_version());
}

JNIEXPORT jlong JNICALL Java_org_dwell_DwellRuntime_nativeOpen(JNIEnv* env, jclass,
                                                               jstring manifest, jint threads) {
    const std::string path = utf8(env, manifest);
    dwell_runtime_options o;
    dwell_runtime_options_init(&o);
    o.manifest_path = manifest ? path.c_str() : nullptr;
    o.threads = threads;
    dwell_runtime* rt = nullptr;
    dwell_error e{};
    if (dwell_runtime_open(&o, &rt, &e) != DWELL_OK) {
        throw_dwell(env, e);
        return 0;
    }
    return to_handle(rt);
}

JNIEXPORT void JNICALL Java_org_dwell_DwellRuntime_nativeClose(JNIEnv*, jclass, jlong h) {
    dwell_runtime_close(from_handle<dwell_runtime>(h));
}

JNIEXPORT jlong JNICALL Java_org_dwell_Model_nativeLoad(JNIEnv* env, jclass, jlong rt,
                                                        jstring path) {
    const std::string p = utf8(env, path);
    dwell_llm* m = nullptr;
    dwell_error e{};
    if (dwell_llm_load(from_handle<dwell_runtime>(rt), p.c_str(), &m, &e) != DWELL_OK) {
        throw_dwell(env, e);
        return 0;
    }
    return to_handle(m);
}

JNIEXPORT void JNICALL Java_org_dwell_Model_nativeFree(JNIEnv*, jclass, jlong h) {
    dwell_llm_free(from_handle<dwell_llm>(h));
}

JNIEXPORT jlong JNICALL Java_org_dwell_Session_nativeCreate(JNIEnv* env, jclass, jlong model,
                                                            jint n_ctx) {
    dwell_session_options o;
    dwell_session_options_init(&o);
    o.n_ctx = n_ctx;
    dwell_session* s = nullptr;
    dwell_error e{};
    if (dwell_session_create(from_handle<dwell_llm>(model), &o, &s, &e) != DWELL_OK) {
        throw_dwell(env, e);
        return 0;
    }
    return to_handle(s);
}

JNIEXPORT void JNICALL Java_org_dwell_Session_nativeFree(JNIEnv*, jclass, jlong h) {
    dwell_session_free(from_handle<dwell_session>(h));
}

JNIEXPORT void JNICALL Java_org_dwell_Session_nativeCancel(JNIEnv*, jclass, jlong h) {
    dwell_session_cancel(from_handle<dwell_session>(h));
}

JNIEXPORT jobject JNICALL Java_org_dwell_Session_nativeGenerate(JNIEnv* env, jclass, jlong h,
                                                                jstring text, jint max_tokens,
                                                                jfloat temperature, jlong seed,
                                                                jobject callback) {
    const std::string t = utf8(env, text);
    dwell_generate_options o;
    dwell_generate_options_init(&o);
    o.max_tokens = max_tokens;
    o.temperature = temperature;
    o.seed = static_cast<uint64_t>(seed);
    CallbackContext ctx{env, callback, nullptr};
    if (callback) {
        jclass cb_class = env->GetObjectClass(callback);
        ctx.on_token = env->GetMethodID(cb_class, "onToken", "(ILjava/lang/String;)Z");
        if (!ctx.on_token) return nullptr;
    }
    dwell_generation_stats st{};
    st.struct_size = sizeof st;
    dwell_error e{};
    const dwell_status s = dwell_session_generate(from_handle<dwell_session>(h), t.c_str(), &o,
                                                  on_token, &ctx, &st, &e);
    if (env->ExceptionCheck()) return nullptr;  // the callback's own exception
    if (s != DWELL_OK) {
        throw_dwell(env, e);
        return nullptr;
    }
    jclass stats_class = env->FindClass("org/dwell/GenerationStats");
    jmethodID ctor = env->GetMethodID(stats_class, "<init>", "(IIDDZ)V");
    return env->NewObject(stats_class, ctor, st.n_prompt, st.n_generated,
                          st.prompt_tokens_per_second, st.generation_tokens_per_second,
                          static_cast<jboolean>(st.stopped_at_eos != 0));
}

}  // extern "C"
