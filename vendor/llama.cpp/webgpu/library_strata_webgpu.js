// Strata's WebGPU bindings behind webgpu/webgpu_cpp.h (emscripten < 4.0.10 has no emdawnwebgpu
// port): C++ objects are handles into SWGPU.objs over the WebGPU JS API (navigator.gpu).
// Promises become futures; swgpu_wait is the one ASYNCIFY import that suspends the caller.
// Module.webgpuStats counts the waits that read something back from the GPU (map, queue done).
// A queue-done wait with no submission since work known complete settles at once (ggml
// synchronizes before every input copy; each real wait costs a device poll, ~11 ms in Deno).

var LibraryStrataWebGPU = {
  $SWGPU__deps: ['malloc', 'free'],
  $SWGPU__postset: 'Module["webgpuStats"] = SWGPU.stats;',
  $SWGPU: {
    objs: [null], // handle -> JS object; 0 is null
    refs: [0],
    freeHandles: [],
    futures: {}, // id -> {kind, done, status, obj, msg, promise}
    nextFuture: 1,
    stats: { mapWaits: 0, workDoneWaits: 0, skippedWaits: 0, suspensions: 0, waitMs: 0 },
    submitted: 0, // queue submissions so far
    completed: 0, // every submission up to this one is known complete
    problem: '', // why no usable adapter, for strata_webgpu_problem
    adapter: null,

    add: function (o) {
      var h = SWGPU.freeHandles.length ? SWGPU.freeHandles.pop() : SWGPU.objs.length;
      SWGPU.objs[h] = o;
      SWGPU.refs[h] = 1;
      return h;
    },
    str: function (ptr, len) {
      return len ? UTF8ToString(ptr, len) : '';
    },
    newString: function (s) {
      var n = lengthBytesUTF8(s) + 1;
      var p = _malloc(n);
      stringToUTF8(s, p, n);
      return p;
    },
    // promise resolves to [status, object handle, message]; a rejection becomes errStatus
    // (3.1.6's handleAsync drops rejections, so none may reach it)
    future: function (kind, promise, errStatus) {
      var id = SWGPU.nextFuture++;
      var f = { kind: kind, done: false, status: 0, obj: 0, msg: '' };
      f.promise = promise.then(function (r) {
        f.status = r[0]; f.obj = r[1] || 0; f.msg = r[2] || ''; f.done = true;
      }, function (e) {
        f.status = errStatus; f.msg = String((e && e.message) || e); f.done = true;
      });
      SWGPU.futures[id] = f;
      return id;
    },
    settled: function (kind) {
      var id = SWGPU.nextFuture++;
      SWGPU.futures[id] = { kind: kind, done: true, skipped: true, status: 1, obj: 0, msg: '' };
      return id;
    },
    complete: function (upTo) {
      if (upTo > SWGPU.completed) SWGPU.completed = upTo;
    },
    bufferRange: function (lo, hi) { return lo + hi * 4294967296; },
  },

  swgpu_addref: function (h) { SWGPU.refs[h]++; },
  swgpu_release: function (h) {
    if (--SWGPU.refs[h] === 0) {
      SWGPU.objs[h] = null;
      SWGPU.freeHandles.push(h);
    }
  },

  swgpu_instance_create: function () {
    if (typeof navigator === 'undefined' || !navigator.gpu) {
      SWGPU.problem = 'WebGPU is not available here (no navigator.gpu)';
      return 0;
    }
    return SWGPU.add(navigator.gpu);
  },
  swgpu_has_wgsl_feature: function (name) {
    var f = navigator.gpu && navigator.gpu.wgslLanguageFeatures;
    return f && f.has(UTF8ToString(name)) ? 1 : 0;
  },
  swgpu_request_adapter: function () {
    var p = navigator.gpu.requestAdapter().then(function (a) {
      if (!a) {
        SWGPU.problem = 'navigator.gpu offers no WebGPU adapter';
        return [3, 0, SWGPU.problem];
      }
      SWGPU.adapter = a;
      return [1, SWGPU.add(a), ''];
    });
    return SWGPU.future('adapter', p, 4);
  },
  swgpu_adapter_has_feature: function (h, name) {
    return SWGPU.objs[h].features.has(UTF8ToString(name)) ? 1 : 0;
  },
  swgpu_adapter_limit: function (h, name) {
    var v = SWGPU.objs[h].limits[UTF8ToString(name)];
    return v === undefined ? NaN : v;
  },
  swgpu_adapter_info: function (h, field) {
    var info = SWGPU.objs[h].info || {};
    var v = info[UTF8ToString(field)];
    return SWGPU.newString(v === undefined || v === null ? '' : String(v));
  },
  swgpu_request_device: function (h, features, limits) {
    var adapter = SWGPU.objs[h];
    var desc = { requiredFeatures: [], requiredLimits: {} };
    UTF8ToString(features).split(',').forEach(function (f) { if (f) desc.requiredFeatures.push(f); });
    UTF8ToString(limits).split(',').forEach(function (kv) {
      var i = kv.indexOf('=');
      var k = kv.slice(0, i);
      if (i > 0 && adapter.limits[k] !== undefined) desc.requiredLimits[k] = Number(kv.slice(i + 1));
    });
    var p = adapter.requestDevice(desc).then(function (device) {
      // errors and loss arrive as events; C++ collects them after each wait
      var errors = device.swgpuErrors = [];
      device.addEventListener('uncapturederror', function (ev) {
        var e = ev.error;
        var kind = (typeof GPUValidationError !== 'undefined' && e instanceof GPUValidationError) ? 2 :
                   (typeof GPUOutOfMemoryError !== 'undefined' && e instanceof GPUOutOfMemoryError) ? 3 :
                   (typeof GPUInternalError !== 'undefined' && e instanceof GPUInternalError) ? 4 : 5;
        errors.push([kind, String(e && e.message)]);
      });
      device.lost.then(function (info) {
        errors.push([100 + (info.reason === 'destroyed' ? 2 : 1), String(info.message)]);
      });
      return [1, SWGPU.add(device), ''];
    });
    return SWGPU.future('device', p, 3);
  },
  swgpu_device_poll_error: function (h, kindPtr) {
    var errors = SWGPU.objs[h].swgpuErrors;
    if (!errors || !errors.length) return 0;
    var e = errors.shift();
    HEAP32[kindPtr >> 2] = e[0];
    return SWGPU.newString(e[1]);
  },
  swgpu_device_queue: function (h) {
    return SWGPU.add(SWGPU.objs[h].queue);
  },
  swgpu_create_buffer: function (h, label, labelLen, size, usage, mapped) {
    return SWGPU.add(SWGPU.objs[h].createBuffer({
      label: SWGPU.str(label, labelLen), size: size, usage: usage, mappedAtCreation: !!mapped,
    }));
  },
  swgpu_create_shader_module: function (h, code, codeLen) {
    return SWGPU.add(SWGPU.objs[h].createShaderModule({ code: SWGPU.str(code, codeLen) }));
  },
  swgpu_create_compute_pipeline: function (h, label, labelLen, module, entry, entryLen, constants, n) {
    var compute = { module: SWGPU.objs[module], entryPoint: SWGPU.str(entry, entryLen) };
    if (n) {
      compute.constants = {};
      for (var i = 0; i < n; i++) { // ConstantEntry: key {data @4, length @8}, value f64 @16
        var p = constants + i * 24;
        compute.constants[SWGPU.str(HEAPU32[(p + 4) >> 2], HEAPU32[(p + 8) >> 2])] = HEAPF64[(p + 16) >> 3];
      }
    }
    return SWGPU.add(SWGPU.objs[h].createComputePipeline({
      label: SWGPU.str(label, labelLen), layout: 'auto', compute: compute,
    }));
  },
  // ggml asks for the layout on every dispatch; the JS API makes a new object per call, so cache it
  swgpu_pipeline_bind_group_layout: function (h, index) {
    var pipe = SWGPU.objs[h];
    var cache = pipe.swgpuLayouts || (pipe.swgpuLayouts = []);
    return SWGPU.add(cache[index] || (cache[index] = pipe.getBindGroupLayout(index)));
  },
  // BindGroupEntry: binding @4, buffer handle @8, offset u64 @16, size u64 @24 (all ones: whole)
  swgpu_create_bind_group: function (h, layout, entries, n) {
    var list = [];
    for (var i = 0; i < n; i++) {
      var q = (entries + i * 32) >> 2;
      var res = { buffer: SWGPU.objs[HEAPU32[q + 2]], offset: SWGPU.bufferRange(HEAPU32[q + 4], HEAPU32[q + 5]) };
      if (HEAPU32[q + 6] !== 0xFFFFFFFF || HEAPU32[q + 7] !== 0xFFFFFFFF) {
        res.size = SWGPU.bufferRange(HEAPU32[q + 6], HEAPU32[q + 7]);
      }
      list.push({ binding: HEAPU32[q + 1], resource: res });
    }
    // no label: ggml makes a bind group per dispatch and the string decode would cost on each
    return SWGPU.add(SWGPU.objs[h].createBindGroup({ layout: SWGPU.objs[layout], entries: list }));
  },
  swgpu_create_command_encoder: function (h) {
    return SWGPU.add(SWGPU.objs[h].createCommandEncoder());
  },
  swgpu_begin_compute_pass: function (h) {
    return SWGPU.add(SWGPU.objs[h].beginComputePass());
  },
  swgpu_copy_buffer_to_buffer: function (h, src, srcOff, dst, dstOff, size) {
    var enc = SWGPU.objs[h];
    enc.copyBufferToBuffer(SWGPU.objs[src], srcOff, SWGPU.objs[dst], dstOff, size);
    (enc.swgpuDsts || (enc.swgpuDsts = [])).push(SWGPU.objs[dst]);
  },
  swgpu_encoder_finish: function (h) {
    var enc = SWGPU.objs[h];
    var cmd = enc.finish();
    if (enc.swgpuDsts) cmd.swgpuDsts = enc.swgpuDsts;
    return SWGPU.add(cmd);
  },
  swgpu_pass_set_pipeline: function (h, p) { SWGPU.objs[h].setPipeline(SWGPU.objs[p]); },
  swgpu_pass_set_bind_group: function (h, i, g) { SWGPU.objs[h].setBindGroup(i, SWGPU.objs[g]); },
  swgpu_pass_dispatch: function (h, x, y, z) { SWGPU.objs[h].dispatchWorkgroups(x, y, z); },
  swgpu_pass_end: function (h) { SWGPU.objs[h].end(); },
  swgpu_queue_submit: function (h, buffers, n) {
    var list = [];
    for (var i = 0; i < n; i++) list.push(SWGPU.objs[HEAPU32[(buffers >> 2) + i]]);
    SWGPU.objs[h].submit(list);
    var k = ++SWGPU.submitted;
    // a MAP_READ buffer is only ever a copy destination: remember the submission that last wrote it
    list.forEach(function (c) { (c.swgpuDsts || []).forEach(function (b) { b.swgpuLastUse = k; }); });
  },
  swgpu_queue_write_buffer: function (h, buf, offset, data, size) {
    SWGPU.objs[h].writeBuffer(SWGPU.objs[buf], offset, HEAPU8, data, size);
  },
  swgpu_queue_work_done: function (h) {
    var upTo = SWGPU.submitted;
    if (SWGPU.completed >= upTo) {
      SWGPU.stats.skippedWaits++;
      return SWGPU.settled('done'); // nothing submitted since: no wait (and no suspension)
    }
    return SWGPU.future('done', SWGPU.objs[h].onSubmittedWorkDone().then(function () {
      SWGPU.complete(upTo);
      return [1];
    }), 3);
  },
  swgpu_buffer_size: function (h) { return SWGPU.objs[h].size; },
  swgpu_buffer_destroy: function (h) { SWGPU.objs[h].destroy(); },
  swgpu_buffer_map: function (h, mode, offset, size) {
    var b = SWGPU.objs[h];
    var lastUse = b.swgpuLastUse || 0;
    return SWGPU.future('map', b.mapAsync(mode, offset, size).then(function () {
      // the queue completes in order: what was submitted up to the copy into b is done
      SWGPU.complete(lastUse);
      return [1];
    }), 3);
  },
  // C++ wants a pointer: copy the mapped bytes into the heap until Unmap
  swgpu_buffer_mapped_range: function (h, offset, size) {
    var b = SWGPU.objs[h];
    var bytes = new Uint8Array(size < 0 ? b.getMappedRange(offset) : b.getMappedRange(offset, size));
    var p = _malloc(bytes.length);
    HEAPU8.set(bytes, p);
    (b.swgpuCopies || (b.swgpuCopies = [])).push(p);
    return p;
  },
  swgpu_buffer_unmap: function (h) {
    var b = SWGPU.objs[h];
    (b.swgpuCopies || []).forEach(function (p) { _free(p); });
    b.swgpuCopies = [];
    b.unmap();
  },

  // Returns WaitStatus (1 success, 2 timed out, 3 error) and, on success, the callback's arguments.
  swgpu_wait__deps: ['$SWGPU', '$Asyncify'],
  swgpu_wait: function (id, timeoutMs, statusPtr, objPtr, msgPtr) {
    // resuming (ASYNCIFY calls the import again while rewinding): hand back the saved result
    if (Asyncify.state === Asyncify.State.Rewinding) return Asyncify.handleSleep(function () {});
    var f = SWGPU.futures[id];
    if (!f) return 3;
    if (f.kind === 'map') SWGPU.stats.mapWaits++;
    if (f.kind === 'done' && !f.skipped) SWGPU.stats.workDoneWaits++;
    var finish = function () {
      delete SWGPU.futures[id];
      HEAP32[statusPtr >> 2] = f.status;
      HEAPU32[objPtr >> 2] = f.obj;
      HEAPU32[msgPtr >> 2] = f.msg ? SWGPU.newString(f.msg) : 0;
      return 1;
    };
    if (f.done) return finish(); // settled already: no suspension
    return Asyncify.handleAsync(async function () {
      var t0 = performance.now();
      SWGPU.stats.suspensions++;
      var timer;
      if (timeoutMs >= 0) {
        await Promise.race([f.promise, new Promise(function (r) { timer = setTimeout(r, timeoutMs); })]);
        clearTimeout(timer);
      } else {
        await f.promise; // never rejects (see future)
      }
      SWGPU.stats.waitMs += performance.now() - t0;
      return f.done ? finish() : 2;
    });
  },

  // For strata.cpp: why ggml's WebGPU backend has no device here ('' when it has one).
  strata_webgpu_problem__deps: ['$SWGPU'],
  strata_webgpu_problem: function () {
    var why = SWGPU.problem;
    var a = SWGPU.adapter;
    if (!why && a && !a.features.has('shader-f16')) {
      var d = a.info && (a.info.description || a.info.device || a.info.vendor);
      why = 'the WebGPU adapter' + (d ? ' (' + d + ')' : '') +
            ' lacks the shader-f16 feature that ggml\'s WebGPU backend requires';
    }
    return SWGPU.newString(why);
  },
};

autoAddDeps(LibraryStrataWebGPU, '$SWGPU');
mergeInto(LibraryManager.library, LibraryStrataWebGPU);
