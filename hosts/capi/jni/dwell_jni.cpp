// JNI glue from the org.dwell Java classes (java/org/dwell) to the C API
// (dwell.h). Handles are the C API's pointers carried in Java longs; every
// failed C call becomes an org.dwell.DwellException with its code and
// message.
#include <jni.h>

#include <string>

#include "dwell.h"

namespace {

// Classes and methods looked up once (JNI_OnLoad), held as global
// references: per-token lookups would leak a local reference each.
struct JavaRefs {
    jclass string_class = nullptr;
    jmethodID string_from_bytes = nullptr;  // String(byte[], String charset)
    jmethodID string_get_bytes = nullptr;   // String.getBytes(String charset)
    jstring utf8_name = nullptr;
    jclass exception_class = nullptr;
    jmethodID exception_ctor = nullptr;
    jclass stats_class = nullptr;
    jmethodID stats_ctor = nullptr;
};
JavaRefs g_java;  // written once by JNI_OnLoad, read-only after

template <class T>
T* from_handle(jlong h) {
    return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}

template <class T>
jlong to_handle(T* p) {
    return static_cast<jlong>(reinterpret_cast<intptr_t>(p));
}

jclass global_class(JNIEnv* env, const char* name) {
    jclass local = env->FindClass(name);
    if (!local) return nullptr;
    auto global = static_cast<jclass>(env->NewGlobalRef(local));
    env->DeleteLocalRef(local);
    return global;
}

void throw_dwell(JNIEnv* env, const dwell_error& e) {
    jstring msg = env->NewStringUTF(e.message);
    auto ex = static_cast<jthrowable>(env->NewObject(g_java.exception_class, g_java.exception_ctor,
                                                     static_cast<jint>(e.code), msg));
    env->DeleteLocalRef(msg);
    if (ex) env->Throw(ex);
}

// A Java string as UTF-8 (JNI's GetStringUTFChars gives modified UTF-8,
// which differs for characters outside the BMP).
std::string utf8(JNIEnv* env, jstring s) {
    if (!s) return {};
    auto bytes = static_cast<jbyteArray>(
        env->CallObjectMethod(s, g_java.string_get_bytes, g_java.utf8_name));
    if (!bytes) return {};
    const jsize n = env->GetArrayLength(bytes);
    std::string out(static_cast<size_t>(n), '\0');
    env->GetByteArrayRegion(bytes, 0, n, reinterpret_cast<jbyte*>(out.data()));
    env->DeleteLocalRef(bytes);
    return out;
}

jstring java_string(JNIEnv* env, const char* text, size_t len) {
    jbyteArray bytes = env->NewByteArray(static_cast<jsize>(len));
    if (!bytes) return nullptr;
    env->SetByteArrayRegion(bytes, 0, static_cast<jsize>(len),
                            reinterpret_cast<const jbyte*>(text));
    auto s = static_cast<jstring>(
        env->NewObject(g_java.string_class, g_java.string_from_bytes, bytes, g_java.utf8_name));
    env->DeleteLocalRef(bytes);
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
    // No JNI call may run with an exception pending: stop instead.
    if (c->env->ExceptionCheck()) return 1;
    jstring s = java_string(c->env, text, len);
    if (!s) return 1;
    const jboolean go = c->env->CallBooleanMethod(c->callback, c->on_token, token, s);
    c->env->DeleteLocalRef(s);
    // A Java exception in the callback stops the reply; it is rethrown.
    return c->env->ExceptionCheck() || !go ? 1 : 0;
}

}  // namespace

extern "C" {

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
    JNIEnv* env = nullptr;
    if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    g_java.string_class = global_class(env, "java/lang/String");
    g_java.exception_class = global_class(env, "org/dwell/DwellException");
    g_java.stats_class = global_class(env, "org/dwell/GenerationStats");
    if (!g_java.string_class || !g_java.exception_class || !g_java.stats_class) return JNI_ERR;
    g_java.string_from_bytes =
        env->GetMethodID(g_java.string_class, "<init>", "([BLjava/lang/String;)V");
    g_java.string_get_bytes =
        env->GetMethodID(g_java.string_class, "getBytes", "(Ljava/lang/String;)[B");
    g_java.exception_ctor =
        env->GetMethodID(g_java.exception_class, "<init>", "(ILjava/lang/String;)V");
    g_java.stats_ctor = env->GetMethodID(g_java.stats_class, "<init>", "(IIDDZ)V");
    jstring utf8_local = env->NewStringUTF("UTF-8");
    g_java.utf8_name = static_cast<jstring>(env->NewGlobalRef(utf8_local));
    env->DeleteLocalRef(utf8_local);
    if (!g_java.string_from_bytes || !g_java.string_get_bytes || !g_java.exception_ctor ||
        !g_java.stats_ctor || !g_java.utf8_name)
        return JNI_ERR;
    return JNI_VERSION_1_6;
}

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
        env->DeleteLocalRef(cb_class);
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
    return env->NewObject(g_java.stats_class, g_java.stats_ctor, st.n_prompt, st.n_generated,
                          st.prompt_tokens_per_second, st.generation_tokens_per_second,
                          static_cast<jboolean>(st.stopped_at_eos != 0));
}

}  // extern "C"
