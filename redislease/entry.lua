-- entry.lua: entry(now) reads the key of KEYS (as acquire.lua's, then its
-- tombstones: a zset token -> expiry, server ms) at now: {holders, waiters,
-- tombstones}, flat lists of token, holder, fence, ms left and shared (0/1)
-- per live holder, of queue member and ms left per live waiter (head first),
-- and of the tombstoned tokens.
local function entry(now)
  local hs, ws = {}, {}
  local lease = redis.call('GET', KEYS[1])
  if lease then
    local tok, fence, holder = decode(lease, KEYS[1])
    if tok ~= '' then
      hs = {tok, holder or '', fence or '0', redis.call('PTTL', KEYS[1]), 0}
    else
      local rs = redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. now, '+inf', 'WITHSCORES')
      for i = 1, #rs, 2 do
        for _, v in ipairs({rs[i], redis.call('HGET', KEYS[7], rs[i]) or '', fence or '0', tonumber(rs[i + 1]) - now, 1}) do
          table.insert(hs, v)
        end
      end
    end
  end
  for _, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    local left = (tonumber(redis.call('ZSCORE', KEYS[4], m)) or 0) - now
    if left > 0 then
      table.insert(ws, m)
      table.insert(ws, left)
    end
  end
  return {hs, ws, redis.call('ZRANGEBYSCORE', KEYS[8], '(' .. now, '+inf')}
end
