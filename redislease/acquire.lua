-- acquire.lua: grant KEYS[1] to ARGV[1] if it is free and no live waiter is
-- queued ahead, or, shared (ARGV[7] is '1'), if no writer holds it and no
-- live exclusive waiter is queued ahead; refresh it if ARGV[1] holds it;
-- otherwise report the holder and, if ARGV[4] is '1', queue ARGV[1] (or
-- refresh its entry).
-- KEYS: lease (token NUL fence NUL holder), fence counter, queue (zset
-- member -> arrival), queue expiries (zset member -> server ms), queue
-- channels (hash member -> the waiter's store's id, if it listens), readers
-- and their holders (see readers.lua). A waiter's member is its token,
-- after a NUL if it waits to share.
-- ARGV: token, holder, TTL ms, queue flag, max waiters, store id or '',
-- shared flag.
-- Returns the fence when granted, else {code, holder, pttl, fence, ahead}
-- with code -1 when the queue was full.
local shared = ARGV[7] == '1'
local t, now = clock()
local tok, fence, holder
local lease = redis.call('GET', KEYS[1])
if lease then
  tok, fence, holder = decode(lease)
  if tok == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return fence
  end
end
local readers = lease and tok == ''
local m = shared and '\0' .. ARGV[1] or ARGV[1]
local rank, ahead, blocked = nil, 0, 0
-- A live reader's shared Acquire only refreshes it.
local again = readers and shared and (tonumber(redis.call('ZSCORE', KEYS[6], ARGV[1])) or 0) > now
if not again and redis.call('EXISTS', KEYS[3]) == 1 then
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
    redis.call('HDEL', KEYS[5], w)
  end
  rank = redis.call('ZRANK', KEYS[3], m)
  ahead = rank or redis.call('ZCARD', KEYS[3])
  blocked = ahead
  -- Only exclusive waiters ahead block a reader (looked for if no writer holds).
  if shared and ahead > 0 and (readers or not lease) then
    blocked = 0
    for _, w in ipairs(redis.call('ZRANGE', KEYS[3], 0, ahead - 1)) do
      if string.byte(w) ~= 0 then
        blocked = 1
        break
      end
    end
  end
end
if (not lease or readers and shared) and blocked == 0 then
  if rank then
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZREM', KEYS[4], m)
    redis.call('HDEL', KEYS[5], m)
  end
  if not lease then
    -- The clock term keeps fences growing if Redis lost the counter.
    local last = tonumber(redis.call('GET', KEYS[2]) or '0')
    if not last then
      error({err = 'CORRUPT the fence counter ' .. KEYS[2] .. ' is not a number'})
    end
    fence = string.format('%.0f', math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
    redis.call('SET', KEYS[2], fence)
    if shared then
      redis.call('DEL', KEYS[6], KEYS[7]) -- dead readers
    end
  end
  if not shared then
    redis.call('SET', KEYS[1], ARGV[1] .. '\0' .. fence .. '\0' .. ARGV[2], 'PX', ARGV[3])
    return fence
  end
  redis.call('ZADD', KEYS[6], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('HSET', KEYS[7], ARGV[1], ARGV[2])
  reseat(KEYS[1], KEYS[6], KEYS[7], fence, now)
  return fence
end
local code = 0
if ARGV[4] == '1' and not rank and ahead >= tonumber(ARGV[5]) then
  code = -1
elseif ARGV[4] == '1' then
  if not rank then
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
    redis.call('ZADD', KEYS[3], (tonumber(last) or 0) + 1, m)
  end
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), m)
  if ARGV[6] ~= '' then
    redis.call('HSET', KEYS[5], m, ARGV[6])
  else
    redis.call('HDEL', KEYS[5], m)
  end
  local keep = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2]) - now
  redis.call('PEXPIRE', KEYS[3], keep)
  redis.call('PEXPIRE', KEYS[4], keep)
  redis.call('PEXPIRE', KEYS[5], keep)
end
return {code, holder or '', redis.call('PTTL', KEYS[1]), fence or '0', ahead}
