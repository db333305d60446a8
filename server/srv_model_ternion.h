/* srv_model_ternion.h - open a GGUF through ternion.h as the server's srv_model. */
#ifndef SRV_MODEL_TERNION_H
#define SRV_MODEL_TERNION_H

#include <stdbool.h>

#include "srv_model.h"

typedef struct {
    const char *model_path;
    const char *alias;   /* served model id; NULL: the generated model's name */
    int n_ctx;           /* per slot; 0: the library's default */
    int n_batch;         /* 0: the library's default */
    int n_seq;           /* slots */
    int device;          /* Vulkan device index, -1: none named */
    int backend;         /* TERNION_BACKEND_* (--device; auto by default) */
    int n_threads, n_threads_batch; /* CPU backend (-t, -tb); 0: the physical cores */
    int expert_cache_mib;           /* CPU backend, MoE models: --expert-cache MiB (0: experts in place) */
    bool cpu_moe;                   /* Vulkan, MoE models: --cpu-moe, every layer's experts on the CPU */
    bool mmap_weights;              /* CPU backend: --mmap, the matrices read in the file mapping */
    int n_cpu_moe;                  /* --n-cpu-moe N: the first N layers' (0: none) */
    bool lm_head_q8;
    bool lm_head_q6k;
    const char *chat_template; /* --chat-template NAME; NULL: the file's tokenizer.chat_template */
} srv_ternion_opts;

int srv_model_ternion_open(const srv_ternion_opts *o, srv_model *out, char *err);
void srv_model_ternion_close(srv_model *m);

#endif
