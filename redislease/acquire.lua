-- acquire.lua: acquire, and take, its common case in a batch
-- (acquiremany.lua).

-- fences holds the fence counters a script's grants advanced (key, fence,
-- ...), written with one MSET once its requests are done (saveFences).
local fences = {}
local function saveFences()
  if #fences > 0 then
    redis.call('MSET', unpack(fences))
  end
end

-- nextFence returns the fence after counter fk's value last (nil: read it).
-- The clock term keeps fences growing if Redis lost the counter. Lua's
-- numbers are doubles: a counter of 2^53 or more is not one we wrote.
local function nextFence(fk, last)
  last = tonumber(last or redis.call('GET', fk) or '0')
  if not last or last >= 9007199254740992 then
    error({err = 'CORRUPT the fence counter ' .. fk .. ' is not a number'})
  end
  return string.format('%d', math.max(last + 1, (clock())))
end

-- granted records that fence of counter fk was granted, and returns it.
local function granted(fk, fence)
  table.insert(fences, fk)
  table.insert(fences, fence)
  return fence
end

-- take grants free lease lk, whose fence counter fk reads last, to tok
-- (exclusive) for ms; SET NX refuses a key of another type.
local function take(lk, fk, last, tok, name, ms)
  local fence = nextFence(fk, last)
  if not redis.call('SET', lk, tok .. '\0' .. fence .. '\0' .. name, 'NX', 'PX', ms) then
    notLease(lk)
  end
  return granted(fk, fence)
end

-- acquire(ks, tok, name, ms, queue, max, id, shared) grants lease ks[1] to
-- token tok (holder name, for ms) if it is free and no live waiter is
-- queued ahead, or, shared (shared is '1'), if no writer holds it
-- and no live exclusive waiter is queued ahead; refreshes it if tok holds
-- it; otherwise reports the holder and, if queue is '1', queues tok (or
-- refreshes its entry) unless max live waiters are queued. id is the store's
-- id if it listens, else ''.
-- ks[1..7]: lease (token NUL fence NUL holder), fence counter, queue
-- (zset member -> arrival), queue expiries (zset member -> server ms), queue
-- channels (hash member -> the waiter's store's id, if it listens), readers
-- and their holders (see readers.lua). A waiter's member is its token,
-- after a NUL if it waits to share.
-- Returns the fence when granted, else {code, holder, pttl, fence, ahead}
-- with code -1 when the queue was full.
local function acquire(ks, tok, name, ms, queue, max, id, shared)
  local lk, fk, q, qx, qc, rk, rh = unpack(ks, 1, 7)
  shared = shared == '1'
  -- MGET reads a key of another type as nil: GET, which refuses it, checks
  -- a missing lease before anything but SET NX writes over it.
  local got = redis.call('MGET', lk, fk)
  local lease, owner, fence, holder = got[1], nil, nil, nil
  if lease then
    owner, fence, holder = decode(lease, lk)
    if owner == tok then
      redis.call('PEXPIRE', lk, ms)
      return fence
    end
  elseif shared then
    redis.call('GET', lk)
  end
  local readers = lease and owner == ''
  local m = shared and '\0' .. tok or tok
  local rank, ahead, blocked = nil, 0, 0
  -- A live reader's shared Acquire only refreshes it.
  local again = readers and shared and (tonumber(redis.call('ZSCORE', rk, tok)) or 0) > select(2, clock())
  if not again and redis.call('EXISTS', q) == 1 then
    local _, now = clock()
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', qx, '-inf', now)) do
      redis.call('ZREM', q, w)
      redis.call('ZREM', qx, w)
      redis.call('HDEL', qc, w)
    end
    rank = redis.call('ZRANK', q, m)
    ahead = rank or redis.call('ZCARD', q)
    blocked = ahead
    -- Only exclusive waiters ahead block a reader (looked for if no writer holds).
    if shared and ahead > 0 and (readers or not lease) then
      blocked = 0
      for _, w in ipairs(redis.call('ZRANGE', q, 0, ahead - 1)) do
        if string.byte(w) ~= 0 then
          blocked = 1
          break
        end
      end
    end
  end
  if (not lease or readers and shared) and blocked == 0 then
    if not shared then
      fence = take(lk, fk, got[2], tok, name, ms)
    elseif not lease then
      fence = granted(fk, nextFence(fk, got[2]))
      redis.call('DEL', rk, rh) -- dead readers
    end
    if rank then
      redis.call('ZREM', q, m)
      redis.call('ZREM', qx, m)
      redis.call('HDEL', qc, m)
    end
    if not shared then
      return fence
    end
    local _, now = clock()
    redis.call('ZADD', rk, now + tonumber(ms), tok)
    redis.call('HSET', rh, tok, name)
    reseat(lk, rk, rh, fence, now)
    return fence
  end
  if not lease then
    redis.call('GET', lk)
  end
  local code = 0
  if queue == '1' and not rank and ahead >= tonumber(max) then
    code = -1
  elseif queue == '1' then
    local _, now = clock()
    if not rank then
      local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')[2]
      redis.call('ZADD', q, (tonumber(last) or 0) + 1, m)
    end
    redis.call('ZADD', qx, now + tonumber(ms), m)
    if id ~= '' then
      redis.call('HSET', qc, m, id)
    else
      redis.call('HDEL', qc, m)
    end
    local keep = tonumber(redis.call('ZRANGE', qx, -1, -1, 'WITHSCORES')[2]) - now
    redis.call('PEXPIRE', q, keep)
    redis.call('PEXPIRE', qx, keep)
    redis.call('PEXPIRE', qc, keep)
  end
  return {code, holder or '', redis.call('PTTL', lk), fence or '0', ahead}
end
