-- readers.lua: the prelude of every script (prepended by store.go).
-- A key held shared (by readers) has the lease string "NUL fence NUL holder"
-- (an empty token; tokens are never empty), the epoch's fence and the holder
-- of the reader that expires last, with that reader's expiry; beside it, a
-- zset of readers (token -> expiry, server ms) and a hash token -> holder,
-- with the same expiry.

-- notLease raises the CORRUPT error of lease key lk (store.go maps it to
-- lease.ErrCorrupt).
local function notLease(lk)
  error({err = 'CORRUPT the value of ' .. lk .. ' is not a lease'})
end

-- decode splits the value v of lease key lk (token NUL fence NUL holder)
-- and raises a CORRUPT error for anything else: a value we did not write
-- never reads as a free key or as ours.
local function decode(v, lk)
  local tok, fence, holder = string.match(v, '^([^%z]*)%z(%d+)%z(.*)$')
  if not tok or #fence > 19 then
    notLease(lk)
  end
  return tok, fence, holder
end

-- clock returns the server time in µs and in ms, read once per script: a
-- batch's requests share one reading, as one request's steps do.
local clockUs, clockMs
local function clock()
  if not clockUs then
    local t = redis.call('TIME')
    clockUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
    clockMs = math.floor(clockUs / 1000)
  end
  return clockUs, clockMs
end

-- try returns f(...), or its error as an error reply: in a batch, a
-- request's error fails that request only.
local function try(f, ...)
  local ok, r = pcall(f, ...)
  if ok then
    return r
  end
  return {err = type(r) == 'table' and r.err or tostring(r)}
end

-- reseat drops the readers of zset rk (holders hk) dead at now and points
-- lease lk, with fence, at the last live one; with none left, it deletes all
-- three. Returns whether any reader is left.
local function reseat(lk, rk, hk, fence, now)
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', rk, '-inf', now)) do
    redis.call('ZREM', rk, r)
    redis.call('HDEL', hk, r)
  end
  local last = redis.call('ZRANGE', rk, -1, -1, 'WITHSCORES')
  if not last[1] then
    redis.call('DEL', lk, rk, hk)
    return false
  end
  local keep = tonumber(last[2]) - now
  redis.call('SET', lk, '\0' .. fence .. '\0' .. (redis.call('HGET', hk, last[1]) or ''), 'PX', keep)
  redis.call('PEXPIRE', rk, keep)
  redis.call('PEXPIRE', hk, keep)
  return true
end

-- announce publishes key on channel, followed by NUL and head, the first
-- live waiter, if it is exclusive; on channel .. ':' .. its store's id when
-- hash qc names one (see release.lua).
local function announce(qc, head, channel, key)
  if head and string.byte(head) ~= 0 then
    key = key .. '\0' .. head
    local id = redis.call('HGET', qc, head)
    if id then
      channel = channel .. ':' .. id
    end
  end
  redis.call('PUBLISH', channel, key)
end
